"""What the cluster emits about a simulated pod: typed records for the core's fast path,
and the same thing as the API server's JSON (for replay files and the `--wire json` run,
which goes through the core's own decoder). Timestamps are whole seconds, as the API
server writes them, so both paths give the core identical inputs (tests check it).
"""

from __future__ import annotations

import zlib
from math import floor
from typing import Any

import msgspec
import orjson

from remediator.contract.decision import Decision
from remediator.inputs.pods import engine_run
from remediator.inputs.records import FirstToken, Input, PodEvent, PodSeen, WatchType
from remediator.inputs.schema import (
    Container,
    ContainerState,
    ContainerStatus,
    PodSpec,
    Resources,
    Running,
)
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.kube import (
    BASE_TIME,
    CONTAINER,
    GPU_UTIL,
    GRACE_S,
    UNSCHEDULABLE,
    event_object,
    go_duration,
    pod_ip,
    pod_object,
    rfc3339,
    wall,
)

# Shared by every pod of a model, tp and image, so the core parses a spec once (its memo is by
# identity); bounded by the images a run rolls out. A pod's spec once it has a node is its
# own (`_node_spec`): one kept per (image, node) grew with every rollout × node, across runs
# (17,500 after two of the fleet day), each with lists and dicts the garbage collector walks.
_specs: dict[tuple[str, int, str], PodSpec] = {}
_labels: dict[tuple[str, str], dict[str, str]] = {}
_owners: dict[tuple[str, str], str] = {}


def labels(p: Pod) -> dict[str, str]:
    key = (p.dep.spec.name, p.rs_hash)
    found = _labels.get(key)
    if found is None:
        found = _labels[key] = {
            "app": "vllm-inference",
            "app.kubernetes.io/name": p.dep.spec.name,
            "app.kubernetes.io/component": "inference-server",
            "model": p.dep.spec.model.split("/")[-1].lower(),
            "pod-template-hash": p.rs_hash,
        }
    return found


def _owner(p: Pod) -> str:
    key = (p.dep.spec.name, p.rs_hash)
    found = _owners.get(key)
    if found is None:
        found = _owners[key] = f"ReplicaSet/{p.dep.spec.name}-{p.rs_hash}"
    return found


def _spec(p: Pod) -> PodSpec:
    """The pod's spec before it has a node."""
    key = (p.dep.spec.model, p.dep.spec.tp, p.image)
    found = _specs.get(key)
    if found is None:
        tp = str(p.dep.spec.tp)
        gpu = {"cpu": "16", "memory": "200Gi", "nvidia.com/gpu": tp}
        container = Container(
            name=CONTAINER,
            image=p.image,
            command=["python3", "-m", "vllm.entrypoints.openai.api_server"],
            args=["--model", p.dep.spec.model, "--tensor-parallel-size", tp,
                  "--gpu-memory-utilization", GPU_UTIL, "--max-model-len", "32768",
                  "--max-num-seqs", "256", "--port", "8000", "--download-dir", "/models"],
            resources=Resources(limits=gpu, requests=dict(gpu)),
        )  # fmt: skip
        found = _specs[key] = PodSpec(containers=[container])
    return found


def pod_record(p: Pod, stage: str, watch: WatchType = "MODIFIED") -> PodSeen:
    """The Pod as a watch event shows it at `stage` (pending, unschedulable, scheduled,
    running or ready). Times as `wall` writes them (whole epoch seconds), computed inline:
    this runs for every pod change (five or so per cold start)."""
    fixed = p.wire
    if fixed is None:
        fixed = p.wire = _fixed(p)
    labels_, owner, pending_spec, ip = fixed
    base = BASE_TIME
    created = float(base + floor(p.created))
    at = created
    t = p.scheduled
    scheduled = None if t is None or stage == "unschedulable" else float(base + floor(t))
    if scheduled is not None:
        at = scheduled
    running = stage == "running" or stage == "ready"
    t = p.started
    started = float(base + floor(t)) if t is not None and running else None
    if started is not None:
        at = max(started, scheduled + 1.0 if scheduled is not None else started)
    t = p.ready
    ready = float(base + floor(t)) if t is not None and stage == "ready" else None
    if ready is not None and ready > at:
        at = ready
    deleting = watch == "DELETED"
    asked = None
    if deleting and p.deleted is not None:
        # when the delete was asked (deletionTimestamp - grace)
        asked = float(base + floor(p.deleted))
        at = max(at, asked)
    node = p.node.name if p.scheduled is not None and p.node is not None else None
    # the API server's own stamp (managedFields): the create, then the kubelet's last write
    written = created
    node_latest = None  # the kubelet's newest stamp: its conditions and the start
    statuses = None
    if started is not None:
        written = max(created, ready if ready is not None else started)
        node_latest = max(started, ready or 0.0, (scheduled or started) + 1.0)
        statuses = _statuses_of(p, started)
    # (positional, in PodSeen's field order: a keyword call costs more, once per change)
    return PodSeen(
        watch, p.uid, p.dep.spec.namespace, p.name, created,
        node if scheduled is not None else None,  # node
        "Running" if started is not None else "Pending",  # phase
        scheduled,
        UNSCHEDULABLE if stage == "unschedulable" else None,  # unschedulable
        ready,
        scheduled if started is not None else None,  # initialized: no init containers
        statuses,
        None,  # init_statuses
        deleting,
        labels_,
        pending_spec if node is None else _node_spec(p, node),
        owner,
        1,  # version, as pod_object writes it
        at,
        ip if started else None,  # status.podIP once the sandbox runs
        written,
        node_latest,
        asked,  # deletion_asked
    )  # fmt: skip


def _fixed(p: Pod) -> tuple[dict[str, str], str, PodSpec, str]:
    """What a pod's records share for its life: labels, owner, its spec before it has a
    node, its IP."""
    return labels(p), _owner(p), _spec(p), pod_ip(p.index)


def _node_spec(p: Pod, node: str) -> PodSpec:
    """`_spec` once the pod has a node (kept on the pod: a pod never moves), its
    containers shared."""
    kept = p.node_spec
    if kept is None or kept[0] != node:
        kept = p.node_spec = (node, msgspec.structs.replace(_spec(p), nodeName=node))
    return kept[1]


def _statuses_of(p: Pod, started: float | None) -> list[ContainerStatus] | None:
    """`_statuses`, written once per container start (a pod shows it Running, Ready and
    deleted): the records share the list, which nobody changes."""
    if started is None:
        return None
    cached = p.statuses
    if cached is None or cached[0] != started:
        cached = p.statuses = (started, _statuses(started) or [])
    return cached[1]


def _statuses(started: float | None) -> list[ContainerStatus] | None:
    """The engine container's status once it runs, as the kubelet writes it."""
    if started is None:
        return None
    state = ContainerState(running=Running(startedAt=rfc3339(int(started))))
    return [ContainerStatus(name=CONTAINER, state=state, lastState=ContainerState())]


def event_record(p: Pod, reason: str, message: str, t: float) -> PodEvent:
    when = wall(t)
    return PodEvent(
        watch="ADDED",
        pod_uid=p.uid,
        namespace=p.dep.spec.namespace,
        pod=p.name,
        reason=reason,
        message=message,
        container=CONTAINER,
        init=False,
        first=when,
        last=when,
        count=1,
        created=when,
        at=when,
    )


def first_token_record(p: Pod, t: float) -> FirstToken:
    return FirstToken(p.dep.spec.namespace, p.name, p.uid, wall(t))


def pulled_message(image: str, seconds: float | None) -> str:
    if seconds is None:
        return f'Container image "{image}" already present on machine'
    d = go_duration(int(seconds * 1000) * 1_000_000)
    return f'Successfully pulled image "{image}" in {d} ({d} including waiting)'


# ---- the same, as the API server's JSON ---------------------------------------------------
def as_json(item: Input, pod: Pod | None) -> bytes:
    """The watch line (or observation) that decodes to `item`."""
    if isinstance(item, PodSeen):
        assert pod is not None
        return _pod_json(item, pod)
    if isinstance(item, PodEvent):
        assert pod is not None and item.first is not None
        warning = item.reason in ("Failed", "BackOff")
        obj = event_object(pod, item.reason, item.message, int(item.first), warning)
        return orjson.dumps({"type": item.watch, "object": obj})
    if isinstance(item, FirstToken):
        return orjson.dumps({"kind": "FirstToken", "namespace": item.namespace, "pod": item.pod,
                             "uid": item.uid, "time": rfc3339(int(item.at))})  # fmt: skip
    raise TypeError(f"no JSON form for {type(item).__name__}")


def _pod_json(item: PodSeen, pod: Pod) -> bytes:
    if item.unschedulable:
        stage = "unschedulable"
    elif item.ready is not None:
        stage = "ready"
    elif engine_run(item.statuses, CONTAINER).started is not None:
        stage = "running"
    elif item.scheduled is not None:
        stage = "scheduled"
    else:
        stage = "pending"
    obj: dict[str, Any] = pod_object(pod, stage)
    if item.deleting:
        obj["metadata"]["deletionTimestamp"] = rfc3339(int(item.at or 0) + GRACE_S)
        obj["metadata"]["deletionGracePeriodSeconds"] = GRACE_S
    return orjson.dumps({"type": item.watch, "object": obj})


def alert_json(node: str, t: float) -> bytes:
    """Alertmanager's webhook (version 4) for the GPU-memory alert on `node`."""
    labels = {"alertname": "GPUMemoryUnstable", "node": node, "severity": "warning"}
    alert = {"status": "firing", "labels": labels,
             "annotations": {"summary": "GPU memory unsettled"},
             "startsAt": rfc3339(int(wall(t))), "endsAt": "0001-01-01T00:00:00Z",
             "generatorURL": "", "fingerprint": f"{zlib.crc32(node.encode()):016x}"}  # fmt: skip
    return orjson.dumps({"version": "4", "status": "firing", "receiver": "remediator",
                         "groupKey": f"{{}}:{{node=\"{node}\"}}", "groupLabels": {"node": node},
                         "commonLabels": labels, "commonAnnotations": {}, "externalURL": "",
                         "truncatedAlerts": 0, "alerts": [alert]})  # fmt: skip


def verdict_json(d: Decision, stable: bool, t: float) -> bytes:
    detail = "" if stable else "used memory kept moving: spread 9216 MiB > 512 MiB over 20 samples"
    return orjson.dumps({"kind": "GpuMemoryVerdict", "node": d.target, "stable": stable,
                         "detail": detail, "incident": d.incident,
                         "time": rfc3339(int(wall(t)))})  # fmt: skip
