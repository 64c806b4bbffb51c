"""Pod objects: the fields the timeline needs, without model deserialisation."""

from __future__ import annotations

from typing import Any

import msgspec

from remediator.inputs.records import InputError, PodSeen, WatchType
from remediator.inputs.schema import Container, ContainerStatus, ObjectMeta, Pod, PodSpec
from remediator.inputs.timefmt import parse_time

GPU_RESOURCE = "nvidia.com/gpu"
MODEL_LABELS = ("model", "app.kubernetes.io/model", "remediator.io/model")
_EMPTY_SPEC = PodSpec()
_NO_LABELS: dict[str, str] = {}


class SpecInfo(msgspec.Struct, frozen=True, gc=False):
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
    scheduled = ready = initialized = None
    unschedulable = None
    latest = created
    node_latest = None  # the newest time the node's kubelet stamped on it
    phase = statuses = init_statuses = None
    if status is not None:
        phase = status.phase
        statuses, init_statuses = status.containerStatuses, status.initContainerStatuses
        for cond in status.conditions or ():
            t = parse_time(cond.lastTransitionTime) if cond.lastTransitionTime else None
            if t is not None and (latest is None or t > latest):
                latest = t
            if t is not None and cond.type != "PodScheduled":
                node_latest = t if node_latest is None or t > node_latest else node_latest
            if cond.type == "PodScheduled":
                if cond.status == "True":
                    scheduled = t
                elif cond.reason == "Unschedulable":
                    unschedulable = cond.message or "Unschedulable"
            elif cond.status == "True":
                if cond.type == "Ready":
                    ready = t
                elif cond.type == "Initialized":
                    initialized = t
        for s in statuses or ():
            run = s.state.running if s.state is not None else None
            if run is not None and run.startedAt:
                t = parse_time(run.startedAt)
                if latest is None or t > latest:
                    latest = t
                if node_latest is None or t > node_latest:
                    node_latest = t
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
        initialized=initialized,
        statuses=statuses,
        init_statuses=init_statuses,
        deleting=bool(meta.deletionTimestamp),
        labels=meta.labels or _NO_LABELS,
        spec=spec,
        owner=_owner(meta),
        version=int(meta.resourceVersion) if meta.resourceVersion.isdigit() else 0,
        at=latest,
        pod_ip=status.podIP if status is not None else None,
        written=written(meta),
        node_latest=node_latest,
        deletion_asked=asked,
    )


def written(meta: ObjectMeta) -> float | None:
    """When the API server last wrote the object, on its own clock: the newest
    `managedFields[].time` (whole seconds). None when the object carries none."""
    newest = None
    for entry in meta.managedFields or ():
        if entry.time:
            t = parse_time(entry.time)
            if newest is None or t > newest:
                newest = t
    return newest


def _deletion_asked(meta: ObjectMeta) -> float | None:
    """When the delete was asked for: the API server sets deletionTimestamp to that moment plus
    the grace period. Without it, a recorded deletion would carry the time of the pod's last
    transition, and a replay would see the pod gone before a decision the live service made."""
    if not meta.deletionTimestamp:
        return None
    return parse_time(meta.deletionTimestamp) - (meta.deletionGracePeriodSeconds or 0)


class EngineRun(msgspec.Struct, frozen=True, gc=False):
    """The engine container as one Pod object shows it (a struct: one per Pod update, and
    msgspec builds it ~8x faster than a frozen dataclass)."""

    first_started: float | None  # its first run's start: lastState's when it has restarted
    started: float | None  # the current run's start (state.running)
    restarts: int
    waiting: str | None  # state.waiting.reason (ImagePullBackOff, CrashLoopBackOff, ...)


_NOT_SEEN = EngineRun(None, None, 0, None)


def engine_run(statuses: list[ContainerStatus] | None, name: str | None) -> EngineRun:
    """The named container's run; the first status when the name is unknown."""
    if not statuses:
        return _NOT_SEEN
    found = statuses[0] if not name else None
    for s in statuses if name else ():
        if s.name == name:
            found = s
            break
    if found is None:
        return _NOT_SEEN
    first = started = None
    waiting = None
    state = found.state
    if state is not None:
        if state.running is not None and state.running.startedAt:
            first = started = parse_time(state.running.startedAt)
        elif state.terminated is not None and state.terminated.startedAt:
            first = parse_time(state.terminated.startedAt)
        elif state.waiting is not None:
            waiting = state.waiting.reason
    last = found.lastState.terminated if found.lastState is not None else None
    if last is not None and last.startedAt:
        before = parse_time(last.startedAt)  # the current run is a later one
        first = before if first is None or before < first else first
    return EngineRun(first, started, found.restartCount, waiting)


def init_times(
    spec: PodSpec, statuses: list[ContainerStatus] | None
) -> tuple[float | None, float | None]:
    """(first start, done) of the init containers from their statuses.

    Done when every regular init container has exited 0 and every sidecar (an init
    container with restartPolicy Always, 1.29+) has started: then the kubelet starts the
    main containers."""
    if not statuses:
        return None, None
    sidecars = {c.name for c in spec.initContainers or () if c.restartPolicy == "Always"}
    first = done = None
    finished = True
    for s in statuses:
        state = s.state
        run = state.running if state is not None else None
        end = state.terminated if state is not None else None
        last = s.lastState.terminated if s.lastState is not None else None
        for raw in (
            run.startedAt if run else None,
            end.startedAt if end else None,
            last.startedAt if last else None,
        ):
            if raw:
                t = parse_time(raw)
                first = t if first is None or t < first else first
        if s.name in sidecars and run is not None and run.startedAt:
            t = parse_time(run.startedAt)
        elif end is not None and end.exitCode == 0 and end.finishedAt:
            t = parse_time(end.finishedAt)
        else:
            finished = False
            continue
        done = t if done is None or t > done else done
    return first, done if finished else None


def spec_info(spec: PodSpec, labels: dict[str, Any], engines: tuple[str, ...] = ()) -> SpecInfo:
    main = _main_container(spec, engines)
    if main is None:
        return SpecInfo(None, None, 0, _label_model(labels), None, None)
    args = (main.command or []) + (main.args or [])
    flags = _flags(args)
    model = flags.get("--model") or _positional_model(args) or _label_model(labels)
    return SpecInfo(
        container=main.name,
        image=main.image,
        gpus=_gpus(main),
        model=model,
        tp_size=flags.get("--tensor-parallel-size") or flags.get("-tp"),
        gpu_util=flags.get("--gpu-memory-utilization"),
        port=flags.get("--port"),
        served_model=flags.get("--served-model-name"),
    )


def _main_container(spec: PodSpec, engines: tuple[str, ...] = ()) -> Container | None:
    """The engine: the first container the policy names, else the one that holds GPUs,
    else the first one."""
    containers = spec.containers or []
    for name in engines:
        for c in containers:
            if c.name == name:
                return c
    for c in containers:
        if _gpus(c):
            return c
    return containers[0] if containers else None


def _gpus(container: Container) -> int:
    res = container.resources
    if res is None:
        return 0
    value = (res.limits or {}).get(GPU_RESOURCE) or (res.requests or {}).get(GPU_RESOURCE)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _flags(args: list[str]) -> dict[str, str]:
    """Every `--name value` and `--name=value` in one pass; the first of a name wins."""
    found: dict[str, str] = {}
    last = len(args) - 1
    for i, a in enumerate(args):
        if a[:1] != "-":
            continue
        name, eq, value = a.partition("=")
        if eq:
            found.setdefault(name, value)
        elif i < last:
            found.setdefault(a, args[i + 1])
    return found


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
