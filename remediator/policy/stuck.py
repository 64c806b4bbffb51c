"""The stuck-inference-pod rule: what to do about a pod whose phase outlived its budget.

Deciding by phase is the point: deleting a pod stuck in engine init or container start
gives it a fresh start; deleting one that waits for a GPU or for its image cannot help
and only throws away progress, so those are diagnosed and told, never deleted. So is a pod
whose container the kubelet cannot build from its spec (`SPEC_ERRORS`), in any phase.
"""

from __future__ import annotations

from typing import Final

import msgspec

from remediator.contract.decision import Decision
from remediator.inputs.pods import GPU_RESOURCE
from remediator.inputs.records import PodSeen
from remediator.policy.incident import incident_id
from remediator.timeline.model import UNFINISHED, PodTimeline
from remediator.timeline.tracker import Tracker

DELETE_PHASES: Final = frozenset({"engine_init", "container_start"})
# The kubelet cannot build the container from the pod's spec: a ConfigMap, Secret or key it
# names is missing, or runAsNonRoot meets an image that runs as root. Every replacement fails
# the same way on any node, so deleting it cannot help (and with a container-start budget
# learned from siblings that start in seconds, it would be a kill loop every two minutes).
SPEC_ERRORS: Final = frozenset({"CreateContainerConfigError"})


class Facts(msgspec.Struct, frozen=True, gc=False):
    """What the guardrails need to know about the pod's workload and model (a struct: one
    per timer that fires, ~6x cheaper to build than a frozen dataclass)."""

    workload: str | None
    replicas: int | None
    expected_cold_start_s: float
    unsettled_node: str | None = None  # the pod's node, its GPU memory found unsettled
    unsettled_incident: str | None = None  # the incident that told of that node
    rolling: str | None = None  # why its Deployment may not be surged now (rolling_out)
    ready_created: tuple[float, ...] = ()  # its workload's pods Ready lately (ready_created)


def stuck_incident(t: PodTimeline, phase: str) -> str:
    """One incident per pod and phase, whether a timer or an alert noticed it first."""
    return incident_id("stuck", t.uid, phase)


def deletes_in(phase: str, init_deletes: bool = False) -> bool:
    """Whether a pod stuck in `phase` is deleted (init only where the policy says so)."""
    return phase in DELETE_PHASES or (phase == "init" and init_deletes)


def deletes(t: PodTimeline, phase: str, init_deletes: bool = False) -> bool:
    """Whether this pod, stuck in `phase`, is deleted: not when its spec is what fails."""
    return deletes_in(phase, init_deletes) and t.waiting_reason not in SPEC_ERRORS


def decide_stuck(
    t: PodTimeline,
    phase: str,
    why: str,
    facts: Facts,
    now: float,
    init_deletes: bool = False,
    stalled: str | None = None,
) -> Decision:
    deleting = deletes(t, phase, init_deletes)
    then = "deleting it gives the engine a fresh start" if deleting else diagnose(t, phase)
    node = facts.unsettled_node if deleting else None
    if node is not None:
        then += f" (on {node}, whose GPU memory a verification found unsettled)"
    return Decision(
        action="delete-pod" if deleting else "notify",
        namespace=t.namespace,
        target=t.name,
        uid=t.uid,
        reason=f"{why}; {then}",
        incident=stuck_incident(t, phase),
        at=now,
        workload=facts.workload,
        # min_age and blast_radius weigh these; a notify needs none of them.
        pod_created_at=t.created if deleting else None,
        expected_cold_start_s=facts.expected_cold_start_s if deleting else None,
        replicas=facts.replicas if deleting else None,
        phase=phase if deleting else None,
        stalled=stalled if deleting else None,
        ready_created=facts.ready_created if deleting else (),
        unsettled_node=node,
        told_under=facts.unsettled_incident if node is not None else None,
    )


def still_stuck(
    fresh: PodSeen, uid: str, phase: str | None, engines: tuple[str, ...] = ()
) -> str | None:
    """Look again before deleting: None when `fresh` (the pod as a quorum read shows it now)
    is still the instance the decision saw (`uid`), still in `phase` (None: any unfinished
    phase), not Ready and not going; else why it is spared. Pure: the caller reads the pod.

    The state is worked out from the object alone (no Events): a pod whose engine started,
    that became Ready, or that left the phase it was found stuck in has a fresh budget, or
    none; deleting it would kill a pod that is getting there."""
    where = f"{fresh.namespace}/{fresh.name}"
    if fresh.uid != uid:
        return f"{where} is another instance now (uid {fresh.uid}, not {uid})"
    if fresh.deleting:
        return f"{where} is already being deleted"
    if fresh.phase in ("Succeeded", "Failed"):
        return f"{where} has finished ({fresh.phase})"
    tracker = Tracker(engines)
    tracker.apply(fresh, fresh.at or 0.0)
    t = tracker.get(fresh.uid)
    state = t.state() if t is not None else "unknown"
    if state in ("ready", "serving"):
        return f"{where} became Ready"
    if t is not None and t.waiting_reason in SPEC_ERRORS:
        return f"{where} cannot be started from its spec ({t.waiting_reason}): {_SPEC_FIX}"
    if state not in UNFINISHED:
        return f"{where} is {state} now"
    if phase and state != phase:
        return f"{where} moved on from {phase} to {state}"
    return None


_SPEC_FIX = (
    "every replacement would fail the same way, so deleting the pod cannot help: check the "
    "ConfigMaps, Secrets and keys its spec names (kubectl describe pod)"
)


def skew_note(t: PodTimeline) -> str:
    """Where the pod's node clock is proven off: said, with the correction made."""
    skew = t.clock_skew()
    if not skew:
        return ""
    way = "ahead of" if skew > 0 else "behind"
    return (
        f"; node {t.node or '?'}'s clock runs {abs(skew):.0f}s {way} the API server's: "
        "its times were corrected onto the API server's clock"
    )


def diagnose(t: PodTimeline, phase: str) -> str:
    """Why deleting cannot help, and what would."""
    if phase == "scheduling":
        msg = t.unschedulable or "no scheduling event seen"
        if GPU_RESOURCE in msg:
            return (
                f"no GPU capacity ({msg.strip()}); deleting the pod cannot help: "
                "add GPU nodes or free GPUs"
            )
        return f"unschedulable ({msg.strip()}); deleting the pod cannot help"
    if phase == "init":
        return (
            f"init containers still running on {t.node or '?'} (a weights download?); "
            "deleting the pod would restart them: check their logs, storage and network"
        )
    if t.waiting_reason in SPEC_ERRORS:
        return f"the kubelet cannot start it on {t.node or '?'} ({t.waiting_reason}): {_SPEC_FIX}"
    if t.image_backoff() or t.waiting_reason in ("ErrImagePull", "ImagePullBackOff"):
        return (
            f"image pull backing off ({t.waiting_reason or 'pull failed'}) on {t.node or '?'}; "
            "deleting the pod cannot help: check the image reference and registry access"
        )
    return (
        f"image pull slow on {t.node or '?'}; deleting the pod would restart the pull: "
        "pre-pull the image on GPU nodes (gpu-warmup)"
    )


def too_tight(
    t: PodTimeline, workload: str, phase: str, seconds: float, how: str, evidence: str, now: float
) -> Decision:
    """The notice that replaces a kill loop: the budget is below this workload's real phase."""
    reason = (
        f"{phase} budget {seconds:.0f}s ({how}) looks too tight for {workload}: {evidence}. "
        f"Holding deletions in {phase} until a pod of {workload} gets through it; raise "
        f"stuck_pod.budgets.{phase} (or stuck_pod.models) if this model is slow to start"
    )
    return Decision(
        action="notify",
        namespace=t.namespace,
        target=t.name,
        uid=t.uid,
        reason=reason,
        incident=incident_id("budget-too-tight", workload, phase, f"{seconds:.0f}"),
        at=now,
        workload=workload,
    )
