"""Builders for realistic watch events, Events and observations on a fixed clock.

Times are seconds after T0; `at(s)` writes them as the API server does (RFC 3339, `Z`).
Every builder returns a fresh document (tests/sharing.py): a test may change what it built, and
the constants here are immutable.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import orjson

from tests.sharing import fresh

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
T0_EPOCH = T0.timestamp()
NS = "llm"
POD = "llama-70b-0"
UID = "6a1d6c2e-1f0b-4c5e-9d8e-70b000000001"
NODE = "gpu-node-7"
MODEL = "meta-llama/Llama-3.1-70B-Instruct"
IMAGE = "vllm/vllm-openai:v0.6.3"
VLLM_ARGS = (
    "--model",
    MODEL,
    "--tensor-parallel-size",
    "2",
    "--gpu-memory-utilization",
    "0.92",
)

Obj = dict[str, Any]


def at(seconds: float) -> str:
    """T0 + seconds as RFC 3339; microseconds only when there are any."""
    dt = T0 + timedelta(seconds=seconds)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


@fresh
def pod(
    *,
    created: float = 0.0,
    scheduled: float | None = None,
    started: float | None = None,
    ready: float | None = None,
    uid: str = UID,
    name: str = POD,
    node: str | None = NODE,
    args: list[str] | None = None,
    command: list[str] | None = None,
    labels: dict[str, str] | None = None,
    restarts: int = 0,
    waiting: str | None = None,
    phase: str | None = None,
    conditions: bool = True,
) -> Obj:
    """A vLLM pod as the API server shows it at one moment of its cold start."""
    conds: list[Obj] = []
    if scheduled is not None:
        conds.append(_cond("PodScheduled", "True", scheduled))
        conds.append(_cond("Initialized", "True", scheduled))
    if ready is not None:
        conds.append(_cond("Ready", "True", ready))
        conds.append(_cond("ContainersReady", "True", ready))
    elif started is not None:
        conds.append(_cond("Ready", "False", started, reason="ContainersNotReady"))
    state: Obj = {}
    if started is not None:
        state = {"running": {"startedAt": at(started)}}
    elif waiting is not None:
        state = {"waiting": {"reason": waiting}}
    container: Obj = {
        "name": "vllm",
        "image": IMAGE,
        "args": list(VLLM_ARGS) if args is None else args,
        "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}},
    }
    if command is not None:
        container["command"] = command
    status: Obj = {
        "phase": phase or ("Running" if started is not None else "Pending"),
        "containerStatuses": [
            {
                "name": "vllm",
                "image": IMAGE,
                "ready": ready is not None,
                "restartCount": restarts,
                "started": started is not None,
                "state": state,
            }
        ]
        if state
        else [],
    }
    if conditions:
        status["conditions"] = conds
    spec: Obj = {
        "containers": [
            {"name": "metrics-sidecar", "image": "busybox:1.36", "args": ["sleep", "inf"]},
            container,
        ]
    }
    if node is not None and scheduled is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "creationTimestamp": at(created),
            "labels": {"app": "vllm"} if labels is None else labels,
            "ownerReferences": [
                {"kind": "StatefulSet", "name": "llama-70b", "controller": True, "uid": "s1"}
            ],
        },
        "spec": spec,
        "status": status,
    }


def _cond(ctype: str, status: str, t: float, reason: str | None = None) -> Obj:
    c: Obj = {"type": ctype, "status": status, "lastTransitionTime": at(t)}
    if reason:
        c["reason"] = reason
    return c


def watch(obj: Obj, wtype: str = "MODIFIED") -> Obj:
    return {"type": wtype, "object": obj}


@fresh
def event(
    reason: str,
    message: str,
    first: float,
    *,
    last: float | None = None,
    count: int = 1,
    uid: str | None = UID,
    name: str = POD,
    container: str | None = "vllm",
    event_name: str | None = None,
) -> Obj:
    """A core/v1 Event about a pod, as the kubelet or the scheduler records it."""
    involved: Obj = {"kind": "Pod", "namespace": NS, "name": name, "apiVersion": "v1"}
    if uid is not None:
        involved["uid"] = uid
    if container is not None:
        involved["fieldPath"] = f"spec.containers{{{container}}}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name or f"{name}.{reason.lower()}{int(first * 1000):x}",
            "namespace": NS,
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "firstTimestamp": at(first),
        "lastTimestamp": at(first if last is None else last),
        "count": count,
        "type": "Normal",
        "source": {"component": "kubelet", "host": NODE},
    }


@fresh
def new_event(
    reason: str,
    note: str,
    event_time: float,
    *,
    series: tuple[int, float] | None = None,
    uid: str | None = UID,
    name: str = POD,
    container: str | None = "vllm",
) -> Obj:
    """The same fact through events.k8s.io/v1: regarding, note, eventTime (MicroTime), series."""
    regarding: Obj = {"kind": "Pod", "namespace": NS, "name": name, "apiVersion": "v1"}
    if uid is not None:
        regarding["uid"] = uid
    if container is not None:
        regarding["fieldPath"] = f"spec.containers{{{container}}}"
    ev: Obj = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{reason.lower()}", "namespace": NS},
        "regarding": regarding,
        "reason": reason,
        "note": note,
        "eventTime": at(event_time),
        "reportingController": "kubelet",
        "reportingInstance": NODE,
        "action": reason,
        "type": "Normal",
    }
    if series is not None:
        ev["series"] = {"count": series[0], "lastObservedTime": at(series[1])}
    return ev


@fresh
def first_token(t: float, *, uid: str | None = None, name: str = POD) -> Obj:
    obs: Obj = {"kind": "FirstToken", "namespace": NS, "pod": name, "time": at(t)}
    if uid is not None:
        obs["uid"] = uid
    return obs


@fresh
def cloudevent(data: Any, *, ce_type: str = "dev.remediator.first-token", **attrs: Any) -> Obj:
    ce: Obj = {
        "specversion": "1.0",
        "id": "c0ffee-1",
        "source": "/remediator/probe",
        "type": ce_type,
        "datacontenttype": "application/json",
        "data": data,
    }
    ce.update(attrs)
    return ce


def pulled(seconds: str, waiting: str | None = None, size: int | None = None) -> str:
    msg = f'Successfully pulled image "{IMAGE}" in {seconds}'
    if waiting is not None:
        msg += f" ({waiting} including waiting)"
    if size is not None:
        msg += f". Image size: {size} bytes."
    return msg


# The realistic cold start of the issue (figures of one production cluster):
# created 0, Unschedulable at 1, scheduled 12, Pulling 13, Pulled 195 (3m2s), started 289,
# Ready 525, first token 530.
COLD_START = MappingProxyType(
    {
        "scheduling": 12.0 - 0.0,
        "init": None,  # no init containers
        "image_pull": 195.0 - 13.0,
        "container_start": 289.0 - 195.0,
        "engine_init": 525.0 - 289.0,
        "first_token": 530.0 - 525.0,
    }
)
COLD_START_TOTAL = 530.0 - 0.0


def cold_start() -> list[Obj]:
    """The realistic cold start as a watch stream, in the order the API server sends it."""
    return [
        watch(pod(conditions=False), "ADDED"),
        watch(
            event(
                "FailedScheduling",
                "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                1,
                container=None,
            ),
            "ADDED",
        ),
        watch(pod(scheduled=12)),
        watch(
            event("Scheduled", f"Successfully assigned {NS}/{POD} to {NODE}", 12, container=None),
            "ADDED",
        ),
        watch(event("Pulling", f'Pulling image "{IMAGE}"', 13), "ADDED"),
        watch(pod(scheduled=12, waiting="ContainerCreating")),
        watch(event("Pulled", pulled("3m2s", "3m2s", 9876543210), 195), "ADDED"),
        watch(event("Created", "Created container: vllm", 289), "ADDED"),
        watch(event("Started", "Started container vllm", 289), "ADDED"),
        watch(pod(scheduled=12, started=289)),
        watch(pod(scheduled=12, started=289, ready=525)),
        first_token(530),
    ]


def jsonl(objs: list[Obj]) -> bytes:
    return b"".join(orjson.dumps(o) + b"\n" for o in objs)
