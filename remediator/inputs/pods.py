"""Pod objects: the fields the timeline needs, without model deserialisation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from remediator.inputs.records import JSON, InputError, PodSeen, WatchType
from remediator.inputs.timefmt import parse_time_or_none

GPU_RESOURCE = "nvidia.com/gpu"
MODEL_LABELS = ("model", "app.kubernetes.io/model", "remediator.io/model")


@dataclass(frozen=True, slots=True)
class SpecInfo:
    """What the pod spec says about the engine; parsed once per pod."""

    container: str | None  # the main (GPU) container
    image: str | None
    gpus: int
    model: str | None
    tp_size: str | None
    gpu_util: str | None


def pod_seen(watch: WatchType, obj: JSON) -> PodSeen:
    meta = _dict(obj.get("metadata"), "metadata")
    uid, ns, name = _str(meta, "uid"), _str(meta, "namespace"), _str(meta, "name")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    created = parse_time_or_none(meta.get("creationTimestamp"))
    scheduled = ready = None
    unschedulable = None
    latest = created
    for cond in status.get("conditions") or ():
        t = parse_time_or_none(cond.get("lastTransitionTime"))
        if t is not None and (latest is None or t > latest):
            latest = t
        ctype, cstatus = cond.get("type"), cond.get("status")
        if ctype == "PodScheduled":
            if cstatus == "True":
                scheduled = t
            elif cond.get("reason") == "Unschedulable":
                unschedulable = cond.get("message") or "Unschedulable"
        elif ctype == "Ready" and cstatus == "True":
            ready = t
    main = _main_status(spec, status)
    started, restarts, waiting = None, 0, None
    if main is not None:
        restarts = int(main.get("restartCount") or 0)
        state = main.get("state") or {}
        running = state.get("running")
        if running:
            started = parse_time_or_none(running.get("startedAt"))
            if started is not None and (latest is None or started > latest):
                latest = started
        elif state.get("waiting"):
            waiting = state["waiting"].get("reason")
    return PodSeen(
        watch=watch,
        uid=uid,
        namespace=ns,
        name=name,
        created=created,
        node=spec.get("nodeName"),
        phase=status.get("phase"),
        scheduled=scheduled,
        unschedulable=unschedulable,
        ready=ready,
        started=started,
        restarts=restarts,
        waiting_reason=waiting,
        deleting=bool(meta.get("deletionTimestamp")),
        labels=meta.get("labels") or {},
        spec=spec,
        owner=_owner(meta),
        at=latest,
    )


def spec_info(spec: JSON, labels: JSON) -> SpecInfo:
    main = _main_container(spec)
    if main is None:
        return SpecInfo(None, None, 0, _label_model(labels), None, None)
    args = [str(a) for a in (main.get("command") or []) + (main.get("args") or [])]
    model = _flag(args, "--model") or _positional_model(args) or _label_model(labels)
    return SpecInfo(
        container=main.get("name"),
        image=main.get("image"),
        gpus=_gpus(main),
        model=model,
        tp_size=_flag(args, "--tensor-parallel-size") or _flag(args, "-tp"),
        gpu_util=_flag(args, "--gpu-memory-utilization"),
    )


def _main_container(spec: JSON) -> JSON | None:
    """The container that holds GPUs, else the first one."""
    containers = spec.get("containers") or []
    for c in containers:
        if _gpus(c):
            return c  # type: ignore[no-any-return]
    return containers[0] if containers else None


def _main_status(spec: JSON, status: JSON) -> JSON | None:
    statuses = status.get("containerStatuses") or []
    if not statuses:
        return None
    main = _main_container(spec)
    if main is not None:
        for s in statuses:
            if s.get("name") == main.get("name"):
                return s  # type: ignore[no-any-return]
    return statuses[0]  # type: ignore[no-any-return]


def _gpus(container: JSON) -> int:
    res = container.get("resources") or {}
    value = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
        GPU_RESOURCE
    )
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


def _label_model(labels: JSON) -> str | None:
    for key in MODEL_LABELS:
        if labels.get(key):
            return str(labels[key])
    return None


def _owner(meta: JSON) -> str | None:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind')}/{ref.get('name')}"
    return None


def _dict(value: Any, what: str) -> JSON:
    if not isinstance(value, dict):
        raise InputError(f"{what} is missing or not an object")
    return value


def _str(obj: JSON, key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise InputError(f"metadata.{key} is missing")
    return value
