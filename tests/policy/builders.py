"""Small, readable watch events for policy tests (the simulator makes the big realistic ones).

Each builder returns a fresh document (tests/sharing.py): a test may change what it built.
"""

from __future__ import annotations

from typing import Any

from remediator.inputs.timefmt import format_time
from tests.sharing import fresh

T0 = 1_760_000_000.0  # a round epoch second: 2025-10-09T08:53:20Z
MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def ts(offset: float) -> str:
    return format_time(T0 + offset)


@fresh
def pod(
    name: str = "vllm-70b-7c9d5b6f4-abcde",
    uid: str = "11111111-2222-3333-4444-555555555555",
    *,
    watch: str = "MODIFIED",
    ns: str = "llm",
    created: float = 0.0,
    scheduled: float | None = None,
    started: float | None = None,
    ready: float | None = None,
    unschedulable: str | None = None,
    waiting: str | None = None,
    labels: dict[str, str] | None = None,
    node: str | None = "gpu-node-1",
) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    if scheduled is not None:
        conditions.append(_cond("PodScheduled", "True", scheduled))
    elif unschedulable is not None:
        conditions.append(
            {
                **_cond("PodScheduled", "False", created),
                "reason": "Unschedulable",
                "message": unschedulable,
            }
        )
    if ready is not None:
        conditions.append(_cond("Ready", "True", ready))
    status: dict[str, Any] = {"phase": "Running" if started is not None else "Pending"}
    if conditions:
        status["conditions"] = conditions
    if started is not None or waiting is not None:
        state = (
            {"running": {"startedAt": ts(started)}}
            if started is not None
            else {"waiting": {"reason": waiting}}
        )
        status["containerStatuses"] = [
            {"name": "vllm", "state": state, "restartCount": 0, "ready": ready is not None}
        ]
    return {
        "type": watch,
        "object": {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": uid,
                "creationTimestamp": ts(created),
                "labels": labels
                if labels is not None
                else {"app": "vllm-inference", "pod-template-hash": "7c9d5b6f4"},
                "ownerReferences": [
                    {"kind": "ReplicaSet", "name": "vllm-70b-7c9d5b6f4", "controller": True}
                ],
            },
            "spec": {
                "nodeName": node if scheduled is not None else None,
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.6.3",
                        "args": [
                            "--model",
                            MODEL,
                            "--tensor-parallel-size",
                            "2",
                            "--gpu-memory-utilization",
                            "0.85",
                        ],
                        "resources": {"limits": {"nvidia.com/gpu": "2"}},
                    }
                ],
            },
            "status": status,
        },
    }


def _cond(ctype: str, status: str, at: float) -> dict[str, Any]:
    return {"type": ctype, "status": status, "lastTransitionTime": ts(at)}


@fresh
def event(
    reason: str,
    message: str,
    at: float,
    *,
    pod_name: str = "vllm-70b-7c9d5b6f4-abcde",
    uid: str = "11111111-2222-3333-4444-555555555555",
    ns: str = "llm",
    name: str | None = None,
    count: int = 1,
    first: float | None = None,
) -> dict[str, Any]:
    return {
        "type": "ADDED" if count == 1 else "MODIFIED",
        "object": {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": name or f"{pod_name}.{reason.lower()}", "namespace": ns},
            "involvedObject": {
                "kind": "Pod",
                "name": pod_name,
                "namespace": ns,
                "uid": uid,
                "fieldPath": "spec.containers{vllm}",
            },
            "reason": reason,
            "message": message,
            "firstTimestamp": ts(first if first is not None else at),
            "lastTimestamp": ts(at),
            "count": count,
        },
    }


@fresh
def alert(
    status: str,
    labels: dict[str, str],
    at: float,
    *,
    name: str = "VLLMEngineInitSlow",
    fingerprint: str = "a1b2c3d4e5f60718",
) -> dict[str, Any]:
    return {
        "version": "4",
        "groupKey": "{}:{alertname=" + f'"{name}"' + "}",
        "status": status,
        "receiver": "remediator",
        "alerts": [
            {
                "status": status,
                "labels": {"alertname": name, **labels},
                "annotations": {},
                "startsAt": ts(at),
                "endsAt": ts(at + 60) if status == "resolved" else "0001-01-01T00:00:00Z",
                "fingerprint": fingerprint,
            }
        ],
    }


@fresh
def deployment(
    image: str,
    *,
    watch: str = "MODIFIED",
    generation: int = 1,
    ready: int = 2,
    at: float = 0.0,
    model: str = MODEL,
    pods: int | None = None,
    updated: int | None = None,
    observed: int | None = None,
    paused: bool = False,
    name: str = "vllm-70b",
    gpus: int = 2,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`pods`: status.replicas (every ReplicaSet's), `updated` (the current template's) and
    `observed` (observedGeneration) say a rollout's progress; by default there is none.
    `gpus`: what each of its pods needs."""
    status: dict[str, Any] = {
        "observedGeneration": generation if observed is None else observed,
        "readyReplicas": ready,
        "updatedReplicas": ready if updated is None else updated,
    }
    if pods is not None:
        status["replicas"] = pods
    return {
        "type": watch,
        "object": {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {
                "name": name,
                "namespace": "llm",
                "uid": "dep-uid-1" if name == "vllm-70b" else f"dep-uid-{name}",
                "generation": generation,
                "creationTimestamp": ts(at),
                **({"annotations": annotations} if annotations else {}),
            },
            "spec": {
                "replicas": 4,
                **({"paused": True} if paused else {}),
                "template": {
                    "metadata": {"labels": {"app": "vllm-inference"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "vllm",
                                "image": image,
                                "args": ["--model", model],
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                            }
                        ]
                    },
                },
            },
            "status": status,
        },
    }
