"""Deployments, StatefulSets and DaemonSets: what their pod template runs."""

from __future__ import annotations

import msgspec

from remediator.inputs.hedge_annotation import HEDGE, Hedge, read_hedges
from remediator.inputs.pods import spec_info
from remediator.inputs.records import JSON, InputError, WatchType, WorkloadSeen
from remediator.inputs.schema import PodSpec
from remediator.inputs.timefmt import parse_time_or_none

WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})


def workload_seen(watch: WatchType, kind: str, obj: JSON) -> WorkloadSeen:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
        raise InputError(f"{kind} without metadata.name/namespace")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    template = spec.get("template") or {}
    tspec = template.get("spec") or {}
    tlabels = (template.get("metadata") or {}).get("labels") or {}
    images = tuple(
        str(c.get("image"))
        for c in (tspec.get("initContainers") or []) + (tspec.get("containers") or [])
        if c.get("image")
    )
    if kind == "DaemonSet":
        replicas = status.get("desiredNumberScheduled")
        ready = status.get("numberReady") or 0
        updated = status.get("updatedNumberScheduled") or 0
    else:
        replicas = spec.get("replicas", 1)
        ready = status.get("readyReplicas") or 0
        updated = status.get("updatedReplicas") or 0
    pods = status.get("replicas") if kind == "Deployment" else None  # of every ReplicaSet
    info = spec_info(msgspec.convert(tspec, PodSpec), tlabels)
    created = latest = parse_time_or_none(meta.get("creationTimestamp"))
    for cond in status.get("conditions") or ():
        t = parse_time_or_none(cond.get("lastUpdateTime") or cond.get("lastTransitionTime"))
        if t is not None and (latest is None or t > latest):
            latest = t
    return WorkloadSeen(
        watch=watch,
        kind=kind,
        uid=str(meta.get("uid") or ""),
        namespace=meta["namespace"],
        name=meta["name"],
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        replicas=int(replicas) if replicas is not None else None,
        ready_replicas=int(ready),
        updated_replicas=int(updated),
        images=images,
        main_image=info.image,
        model=info.model,
        labels=meta.get("labels") or {},
        template_labels=tlabels,
        at=latest,
        created=created,
        pods=int(pods) if pods is not None else None,
        paused=spec.get("paused") is True,
        gpus=info.gpus,
        hedges=_hedges(kind, meta),
    )


def _hedges(kind: str, meta: JSON) -> tuple[Hedge, ...]:
    """The hedges the Deployment's annotation says run. One the step did not write is no
    hedge (the step refuses it too): the Deployment itself is still seen."""
    text = (meta.get("annotations") or {}).get(HEDGE) if kind == "Deployment" else None
    if not isinstance(text, str):
        return ()
    try:
        return read_hedges(text)
    except ValueError:
        return ()
