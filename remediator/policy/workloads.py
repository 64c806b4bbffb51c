"""Inference workloads as last seen, and the model-image-update rule."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from remediator.contract.decision import Decision
from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.records import WorkloadSeen
from remediator.policy.config import ImageUpdateConfig
from remediator.policy.history import PhaseHistory
from remediator.policy.incident import incident_id
from remediator.policy.outcome import Ignored
from remediator.timeline.model import PodTimeline


@dataclass(frozen=True, slots=True)
class Workload:
    uid: str
    generation: int
    replicas: int | None
    images: tuple[str, ...]
    main_image: str | None
    model: str | None
    rolling: str | None = None  # why a surge now would go to the wrong pods (rolling_out)
    gpus: int = 0  # what each pod needs, for a workload image_update selects (else 0)
    hedges: tuple[Hedge, ...] = ()  # the hedges running on it (the step's annotation)

    @property
    def signature(self) -> tuple[tuple[str, ...], str | None]:
        return self.images, self.model


def workload_key(namespace: str, kind: str, name: str) -> str:
    return f"{namespace}/{kind}/{name}"


def owner_workload(
    namespace: str, owner: str | None, labels: dict[str, object] | None
) -> str | None:
    """A pod's workload: its StatefulSet, or the Deployment behind its ReplicaSet."""
    if owner is None:
        return None
    kind, _, name = owner.partition("/")
    if kind == "ReplicaSet":
        hash_ = str((labels or {}).get("pod-template-hash") or "")
        if hash_ and name.endswith("-" + hash_):
            return workload_key(namespace, "Deployment", name[: -len(hash_) - 1])
        return workload_key(namespace, "ReplicaSet", name)
    return workload_key(namespace, kind, name)


def workload_of(cfg: ImageUpdateConfig, seen: WorkloadSeen) -> Workload:
    """What is kept of a workload as last seen."""
    return Workload(
        seen.uid,
        seen.generation,
        seen.replicas,
        seen.images,
        seen.main_image,
        seen.model,
        rolling_out(seen),
        seen.gpus if _selected(cfg, seen) else 0,
        seen.hedges,
    )


def _selected(cfg: ImageUpdateConfig, seen: WorkloadSeen) -> bool:
    return seen.kind != "DaemonSet" and (
        cfg.selector.matches(seen.template_labels) or cfg.selector.matches(seen.labels)
    )


def rolling_out(seen: WorkloadSeen) -> str | None:
    """Why surging the Deployment now would not start a pod of its current template, or
    None: as the hedge step judges it (steps/hedge.py), from what the watch last said. Mid-
    rollout, the Deployment controller spreads a surge over its ReplicaSets, so the extra pod
    may come from the old template."""
    if seen.kind != "Deployment":
        return None
    if seen.paused:
        return "is paused"
    if seen.observed_generation < seen.generation:
        return "has a change its controller has not acted on yet"
    if seen.pods is not None and seen.updated_replicas < seen.pods:
        return "is rolling out (pods of an older template remain)"
    return None


def image_update(
    cfg: ImageUpdateConfig,
    before: Workload | None,
    seen: WorkloadSeen,
    now: float,
    known: Iterable[Workload] = (),
) -> Decision | Ignored | None:
    """A changed pod-template image or model on an inference workload → warm the GPU nodes;
    not where the `known` workloads' pods need different GPU counts, unless `mixed_gpus`
    says warm (the update is then let be, with why).

    Status-only updates (same template) and first sightings (a restart of remediator
    lists everything as ADDED) are not updates."""
    if not cfg.enabled or seen.watch != "MODIFIED" or before is None or not _selected(cfg, seen):
        return None
    after = Workload(
        seen.uid, seen.generation, seen.replicas, seen.images, seen.main_image, seen.model
    )
    if after.signature == before.signature:
        return None
    new_images = [i for i in seen.images if i not in before.images]
    image = new_images[0] if new_images else seen.main_image
    if before.images != seen.images:
        what = f"image {', '.join(before.images) or '-'} → {', '.join(seen.images) or '-'}"
    else:
        what = f"model {before.model or '-'} → {seen.model or '-'}"
    # (a workload scaled to zero has no pods to place: it mixes nothing until it scales up)
    sizes = sorted({w.gpus for w in known if w.gpus and w.replicas} | {seen.gpus} - {0})
    if cfg.mixed_gpus == "skip" and len(sizes) > 1:
        return Ignored("image_update", workload_key(seen.namespace, seen.kind, seen.name), (
            f"{seen.kind} {seen.namespace}/{seen.name}: {what}; not warming the GPU nodes: "
            f"the inference workloads' pods need {', '.join(map(str, sizes))} GPUs, and an "
            "image on every node lets kube-scheduler's default scoring spread the small pods "
            "over whole nodes (image_update.mixed_gpus: warm where nvidia.com/gpu is scored "
            "MostAllocated)"
        ), now)  # fmt: skip
    params: list[tuple[str, str]] = [("timeout", str(int(cfg.rollout_timeout_s)))]
    if image:
        params.insert(0, ("image", image))
    return Decision(
        action="restart-warmup",
        namespace=cfg.warmup_namespace,
        target=cfg.warmup_daemonset,
        reason=f"{seen.kind} {seen.namespace}/{seen.name}: {what}; warming GPU nodes",
        incident=update_incident(after),
        at=now,
        workload=workload_key(seen.namespace, seen.kind, seen.name),
        params=tuple(params),
    )


def update_incident(w: Workload) -> str:
    """The incident of warming for this state of a workload: one per (uid, images, model)."""
    return incident_id("image-update", w.uid, *w.images, w.model or "")


# A workload's pods that became Ready, by creation time (`Decision.ready_created`): kept in
# the history, keyed by the workload where other samples have a model, so that what one
# decider learned reaches the guard and the other deciders (`Learned`), and comes back after
# a restart with the rest (serve's state, the Kafka guard's rows). The last `window` of them.
READY_CREATED: Final = "ready_created"


def learn_ready(t: PodTimeline, history: PhaseHistory) -> None:
    """The pod became Ready: its workload's pods can start now (blast_radius heals by it)."""
    workload = owner_workload(t.namespace, t.owner, t.labels)
    if workload is not None and t.created is not None:
        history.add(workload, READY_CREATED, t.created)


def ready_created(history: PhaseHistory, workload: str | None) -> tuple[float, ...]:
    """When the workload's pods that became Ready lately were created, oldest first."""
    if workload is None or not history.count(workload, READY_CREATED):
        return ()
    return tuple(sorted(history.recent(workload, READY_CREATED, history.window)))
