"""Pod objects: the fields the timeline needs, without model deserialisation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remediator.inputs.records import InputError, PodSeen, WatchType
from remediator.inputs.schema import Container, ContainerStatus, ObjectMeta, Pod, PodSpec
from remediator.inputs.timefmt import parse_time

GPU_RESOURCE = "nvidia.com/gpu"
MODEL_LABELS = ("model", "app.kubernetes.io/model", "remediator.io/model")
_EMPTY_SPEC = PodSpec()
_NO_LABELS: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class SpecInfo:
    """What the pod spec says about the engine; parsed once per pod."""

    container: str | None  # the main (GPU) container
    image: str | None
    gpus: int
    model: str | None
    tp_size: str | None
    gpu_util: str | None
    port: str | None = None  # --port: the OpenAI-compatible server's
    served_model: str | None = None  # --served-model-name: what requests must name


def pod_seen(watch: WatchType, pod: Pod) -> PodSeen:
    meta = pod.metadata
    if meta is None or not meta.uid or not meta.name or not meta.namespace:
        raise InputError("Pod without metadata.uid, name or namespace")
    spec = pod.spec or _EMPTY_SPEC
    status = pod.status
    created = parse_time(meta.creationTimestamp) if meta.creationTimestamp else None
    scheduled = ready = None
    unschedulable = None
    latest = created
    phase = None
    main = None
    if status is not None:
        phase = status.phase
        for cond in status.conditions or ():
            t = parse_time(cond.lastTransitionTime) if cond.lastTransitionTime else None
            if t is not None and (latest is None or t > latest):
                latest = t
            if cond.type == "PodScheduled":
                if cond.status == "True":
                    scheduled = t
                elif cond.reason == "Unschedulable":
                    unschedulable = cond.message or "Unschedulable"
            elif cond.type == "Ready" and cond.status == "True":
                ready = t
        main = _main_status(spec, status.containerStatuses)
    started, restarts, waiting = None, 0, None
    if main is not None:
        restarts = main.restartCount
        state = main.state
        if state is not None and state.running is not None:
            started = parse_time(state.running.startedAt) if state.running.startedAt else None
            if started is not None and (latest is None or started > latest):
                latest = started
        elif state is not None and state.waiting is not None:
            waiting = state.waiting.reason
    asked = _deletion_asked(meta)
    if asked is not None and (latest is None or asked > latest):
        latest = asked
    return PodSeen(
        watch=watch,
        uid=meta.uid,
        namespace=meta.namespace,
        name=meta.name,
        created=created,
        node=spec.nodeName,
        phase=phase,
        scheduled=scheduled,
        unschedulable=unschedulable,
        ready=ready,
        started=started,
        restarts=restarts,
        waiting_reason=waiting,
        deleting=bool(meta.deletionTimestamp),
        labels=meta.labels or _NO_LABELS,
        spec=spec,
        owner=_owner(meta),
        at=latest,
        pod_ip=status.podIP if status is not None else None,
    )


def _deletion_asked(meta: ObjectMeta) -> float | None:
    """When the delete was asked for: the API server sets deletionTimestamp to that moment plus
    the grace period. Without it, a recorded deletion would carry the time of the pod's last
    transition, and a replay would see the pod gone before a decision the live service made."""
    if not meta.deletionTimestamp:
        return None
    return parse_time(meta.deletionTimestamp) - (meta.deletionGracePeriodSeconds or 0)


def spec_info(spec: PodSpec, labels: dict[str, Any]) -> SpecInfo:
    main = _main_container(spec)
    if main is None:
        return SpecInfo(None, None, 0, _label_model(labels), None, None)
    args = (main.command or []) + (main.args or [])
    model = _flag(args, "--model") or _positional_model(args) or _label_model(labels)
    return SpecInfo(
        container=main.name,
        image=main.image,
        gpus=_gpus(main),
        model=model,
        tp_size=_flag(args, "--tensor-parallel-size") or _flag(args, "-tp"),
        gpu_util=_flag(args, "--gpu-memory-utilization"),
        port=_flag(args, "--port"),
        served_model=_flag(args, "--served-model-name"),
    )


def _main_container(spec: PodSpec) -> Container | None:
    """The container that holds GPUs, else the first one."""
    containers = spec.containers or []
    for c in containers:
        if _gpus(c):
            return c
    return containers[0] if containers else None


def _main_status(spec: PodSpec, statuses: list[ContainerStatus] | None) -> ContainerStatus | None:
    if not statuses:
        return None
    main = _main_container(spec)
    if main is not None:
        for s in statuses:
            if s.name == main.name:
                return s
    return statuses[0]


def _gpus(container: Container) -> int:
    res = container.resources
    if res is None:
        return 0
    value = (res.limits or {}).get(GPU_RESOURCE) or (res.requests or {}).get(GPU_RESOURCE)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _flag(args: list[str], name: str) -> str | None:
    """`--name value` or `--name=value`."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def _positional_model(args: list[str]) -> str | None:
    """`vllm serve MODEL ...` names the model positionally."""
    for i, a in enumerate(args[:-1]):
        if a == "serve" and not args[i + 1].startswith("-"):
            return args[i + 1]
    return None


def _label_model(labels: dict[str, Any]) -> str | None:
    for key in MODEL_LABELS:
        if labels.get(key):
            return str(labels[key])
    return None


def _owner(meta: ObjectMeta) -> str | None:
    for ref in meta.ownerReferences or ():
        if ref.controller:
            return f"{ref.kind}/{ref.name}"
    return None
