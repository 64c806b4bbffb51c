"""Readers for the real captures in tests/data (see tests/data/README.md for provenance).

The KServe recording is `kubectl describe` text: its Events are rebuilt as core/v1 Event
JSON with the message and fieldPath exactly as the kubelet wrote them, and times from the
Age column (observation time − age).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from remediator.inputs.timefmt import format_time
from tests.data import CAPTURES, PUBLIC

K8S = PUBLIC / "k8s"
KSERVE_EVENTS = K8S / "describe_events_kserve-0.18_storage-initializer_k8s-v1.36.txt"
KSERVE_NS, KSERVE_POD = "kserve-test", "qwen-llm-predictor-9bf6b7d4f-gnjj7"
KSERVE_UID = "4f0c1ab2-0000-4000-8000-9bf6b7d4f000"  # the capture has none: any UID will do
_ROW = re.compile(r"^\s+(Normal|Warning)\s+(\S+)\s+(\d+)s\s+(\S+)\s+(.*)$")
_FIELD = re.compile(r"^(spec\.(?:initContainers|containers)\{[^}]+\}): (.*)$")


def load(name: str) -> Any:
    """A capture by file name: found in public repositories, else copied from shared/."""
    path = K8S / name
    return orjson.loads((path if path.exists() else CAPTURES / "k8s" / name).read_bytes())


def kserve_events(observed_at: float) -> list[dict[str, Any]]:
    """The storage-initializer's real Events, as a watch would have delivered them."""
    out = []
    for line in KSERVE_EVENTS.read_text().splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        kind, reason, age, source, message = m.groups()
        involved: dict[str, Any] = {
            "kind": "Pod",
            "namespace": KSERVE_NS,
            "name": KSERVE_POD,
            "uid": KSERVE_UID,
        }
        f = _FIELD.match(message)
        if f:
            involved["fieldPath"], message = f.groups()
        when = format_time(observed_at - int(age))
        out.append({
            "type": "ADDED",
            "object": {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{KSERVE_POD}.{reason.lower()}", "namespace": KSERVE_NS},
                "involvedObject": involved,
                "reason": reason,
                "message": message,
                "firstTimestamp": when,
                "lastTimestamp": when,
                "count": 1,
                "type": kind,
                "source": {"component": source},
            },
        })  # fmt: skip
    return out


def kserve_pod(
    created: float, scheduled: float, *, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The predictor pod as KServe builds it (storage-initializer init container, the
    model server as `kserve-container`), in the capture's state: PodInitializing."""
    return {
        "type": "MODIFIED",
        "object": {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": KSERVE_POD,
                "namespace": KSERVE_NS,
                "uid": KSERVE_UID,
                "creationTimestamp": format_time(created),
                "labels": labels or {"app": "vllm-inference", "component": "predictor"},
                "ownerReferences": [
                    {"kind": "ReplicaSet", "name": "qwen-llm-predictor-9bf6b7d4f",
                     "controller": True}
                ],
            },
            "spec": {
                "nodeName": "llm-lab-worker2",
                "initContainers": [{
                    "name": "storage-initializer",
                    "image": "kserve/storage-initializer:v0.18.0",
                    "args": ["hf://Qwen/Qwen2.5-0.5B-Instruct", "/mnt/models"],
                }],
                "containers": [{
                    "name": "kserve-container",
                    "image": "kserve/huggingfaceserver:v0.18.0",
                    "args": ["--model_name=qwen-llm", "--model_name=qwen"],
                }],
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "True",
                     "lastTransitionTime": format_time(scheduled)},
                    {"type": "Initialized", "status": "False",
                     "lastTransitionTime": format_time(scheduled),
                     "reason": "ContainersNotInitialized"},
                ],
                "initContainerStatuses": [{
                    "name": "storage-initializer", "restartCount": 0, "ready": False,
                    "state": {"running": {"startedAt": format_time(scheduled + 15)}},
                }],
                "containerStatuses": [{
                    "name": "kserve-container", "restartCount": 0, "ready": False,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }],
            },
        },
    }  # fmt: skip
