"""Deployment and DaemonSet watch events: the vLLM Deployment and the GPU warmup DaemonSet."""

from __future__ import annotations

from typing import Any

import orjson

from tests.simstream.forms import rfc3339
from tests.simstream.plan import BASE_TIME

JSON = dict[str, Any]


def deployment_event(
    name: str = "vllm-llama-70b",
    model: str = "meta-llama/Llama-3.1-70B-Instruct",
    image: str = "vllm/vllm-openai:v0.6.4.post1",
    *,
    replicas: int = 4,
    ready: int = 4,
    generation: int = 1,
    watch: str = "MODIFIED",
    namespace: str = "inference",
    at: int = BASE_TIME,
) -> bytes:
    """One watch event of the vLLM Deployment; bump `generation` with a new `image`."""
    container = {"name": "vllm", "image": image,
                 "args": ["--model", model, "--tensor-parallel-size", "2",
                          "--gpu-memory-utilization", "0.85"],
                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}  # fmt: skip
    labels = {"app": "vllm-inference", "model": model.split("/")[-1].lower()}
    obj = {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": _meta(name, namespace, generation, at, labels),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },  # fmt: skip
        "status": {
            "observedGeneration": generation,
            "replicas": replicas,
            "updatedReplicas": ready,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [_cond("Available", ready > 0, at), _cond("Progressing", True, at)],
        },
    }
    return orjson.dumps({"type": watch, "object": obj})


def daemonset_event(
    name: str = "gpu-warmup",
    image: str = "vllm/vllm-openai:v0.6.4.post1",
    *,
    nodes: int = 8,
    ready: int = 8,
    generation: int = 1,
    watch: str = "MODIFIED",
    namespace: str = "kube-system",
    at: int = BASE_TIME,
) -> bytes:
    """One watch event of the DaemonSet that pre-pulls the model image onto GPU nodes."""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "remediator"}
    obj = {
        "kind": "DaemonSet",
        "apiVersion": "apps/v1",
        "metadata": _meta(name, namespace, generation, at, labels),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "initContainers": [
                        {"name": "prepull", "image": image, "command": ["/bin/true"]}
                    ],
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}],
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
                },
            },
        },  # fmt: skip
        "status": {
            "currentNumberScheduled": nodes,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": nodes,
            "numberReady": ready,
            "observedGeneration": generation,
            "updatedNumberScheduled": ready,
            "numberAvailable": ready,
        },
    }
    return orjson.dumps({"type": watch, "object": obj})


def _meta(name: str, namespace: str, generation: int, at: int, labels: JSON) -> JSON:
    uid = f"00000000-0000-4000-8000-{name.encode().hex()[:12]:0>12}"
    return {"name": name, "namespace": namespace, "uid": uid,
            "resourceVersion": str(at % 100_000 + generation), "generation": generation,
            "creationTimestamp": rfc3339(at), "labels": labels}  # fmt: skip


def _cond(ctype: str, ok: bool, at: int) -> JSON:
    when = rfc3339(at)
    return {"type": ctype, "status": "True" if ok else "False", "lastUpdateTime": when,
            "lastTransitionTime": when}  # fmt: skip
