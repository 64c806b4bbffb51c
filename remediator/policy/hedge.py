"""Hedged starts: when a pod's engine stalls in a step, start its replacement early.

The stall (`policy.stall`) comes first; the pod is hung, and deleted, only once the stall has
lasted `checks` checks. Between the two, a hedge surges the pod's Deployment by one
(`hedge-pod`, carried by the `hedge-stalled-pod` workflow): the first of the two pods Ready
wins, the other is deleted, and the Deployment returns to its replica count. Pure: what the
engine knows of the pod, its workload and the GPUs, and `now`.

Where it does not hedge, it says why (an `Ignored`): the pod is no Deployment's (a
StatefulSet's pods have fixed names: a surge is not a second try of the same pod). A workload
short of GPUs (a pod of it could not be scheduled for `nvidia.com/gpu` lately: the hedge pod
would queue behind real demand, or take a GPU a real replica is waiting for) is the guard's
to judge (guard.hedge_budget): the engine says what it saw (`GpuNews`), and the guard hears
every decider's, so a pod's hedge is judged by its workload's pods in every partition.
"""

from __future__ import annotations

from typing import Final

from remediator.contract.decision import Decision
from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.pods import GPU_RESOURCE
from remediator.inputs.records import PodEvent, PodSeen
from remediator.policy.config import HedgeConfig
from remediator.policy.incident import incident_id
from remediator.policy.outcome import Ignored, Outcome
from remediator.policy.stall import Stall
from remediator.policy.stuck import Facts
from remediator.timeline.model import PodTimeline

RULE: Final = "hedge"


def hedge_incident(uid: str) -> str:
    """One hedge per pod, ever: the same id however often the stall is seen."""
    return incident_id("hedge", uid)


def short_of_gpus(item: PodSeen | PodEvent) -> bool:
    """The scheduler said this pod does not fit for want of GPUs (the condition's message,
    or a FailedScheduling Event's)."""
    if type(item) is PodSeen:
        return item.unschedulable is not None and GPU_RESOURCE in item.unschedulable
    return item.reason == "FailedScheduling" and GPU_RESOURCE in item.message


def cold_start_gpu_s(t: PodTimeline, ended: float | None = None) -> float:
    """What a cold start held of its GPUs, scheduled to Ready, or to `ended` for one that
    ended before it was Ready (deleted, failed: hung pods' GPUs were held too): what pays
    for hedges (guard.hedge_budget keeps them within a share of it), as the issue counts
    cold-start GPU-minutes and the simulator measures them."""
    if t.gpus <= 0:
        return 0.0
    if ended is not None:
        scheduled = t.scheduled_at()
        return t.gpus * max(0.0, ended - scheduled) if scheduled is not None else 0.0
    phases = t.phase_values(skip=1 | 32)  # scheduled to Ready: the GPUs were held
    return t.gpus * sum((v for v in phases if v is not None), 0.0)  # (a float, if none)


def left_to_hedge(t: PodTimeline, hedges: tuple[Hedge, ...], now: float) -> str | None:
    """Why a stalled pod is not deleted for its stall now, or None (it is, as any is).

    Its Deployment's hedge of it runs, and a new pod races it: scheduled, not going (the hedge
    step says which, in its annotation), until the hedge's deadline. The hedge ends the race:
    the first of the two Ready serves and the other is deleted. Deleted for its stall
    meanwhile, the stalled pod would gain its replica nothing (the racer is its replacement
    already, started earlier than any new one), and it may be a healthy pod that is slow:
    on a node slower than any its model's siblings ran on, a step's time past its stall
    limit is not a hang (random fleet 628 with every pod's log read: a healthy pod deleted
    223 s into a compile its siblings took 83 s for, its hedge racing it since 105 s before).
    Where no new pod has a node (waiting for GPUs the stalled pod may hold), it is deleted
    for its stall: its GPUs may be what the hedge pod waits for. (Only with
    `hedge.leave_to_race`: a hung pod left to its hedge holds its GPUs until the race ends.)"""
    hedge = next((h for h in hedges if h.uid == t.uid), None)
    if hedge is None or hedge.racing is None or now >= hedge.deadline:
        return None
    return f"its hedge runs: new pod {hedge.racing} races it, the first Ready of the two wins"


def racing_for(t: PodTimeline, hedges: tuple[Hedge, ...], now: float) -> Hedge | None:
    """The running hedge whose new pod `t` is (the step names it racing), or None.

    A racer that stalls is not hedged while that hedge runs: its stalled pod and it hold the
    replica's two places already (the step would start a third pod; the simulator's step
    refuses it). Once the stalled pod is gone (deleted, hung) the hedge ends, the racer is the
    replica's pod, and its own hedge may start; where the stalled pod is Ready, the racer is
    the loser the step deletes. Waiting for the end of the first hedge rather than for the
    racer to hang: in the simulated tuned fleet with 5% hangs (3 seeds x 6 h) a racer that hung
    too was deleted at its 50 s stall and its replacement started from nothing (10 of the 43
    replicas past 95 s; with this, 11 replicas past 110 s became 8)."""
    for hedge in hedges:
        if hedge.racing == t.uid and hedge.uid != t.uid and now < hedge.deadline:
            return hedge
    return None


def stalled(stall: Stall, model: str, now: float, share: float = 1.0) -> str:
    """Which step stalled (or has run `share` of its stall's limit: a hedge may start
    before the stall), and how its time compares with the siblings'."""
    what = stall.step if stall.timed_as == stall.step else f"{stall.step} (timed as "
    what += "" if stall.timed_as == stall.step else f"{stall.timed_as})"
    past = f"over its {stall.limit:.0f}s limit"
    if share < 1.0:
        past = f"past {share:g} of its {stall.limit:.0f}s stall limit"
    return (
        f"engine_init stalled in vLLM step {what} for {now - stall.began:.0f}s, {past}: "
        f"{stall.samples} siblings of {model} took {stall.siblings_s:.0f}s there"
    )


def decide_hedge(
    cfg: HedgeConfig,
    t: PodTimeline,
    stall: Stall,
    facts: Facts,
    now: float,
) -> Outcome:
    """A hedge for the stalled pod, or why not."""
    subject = f"{t.namespace}/{t.name}"
    workload = facts.workload
    if workload is None or workload.split("/")[1:2] != ["Deployment"]:
        why = f"no hedge: {subject} belongs to no Deployment ({workload or 'no owner'})"
        return Ignored(RULE, subject, why, now)
    if facts.rolling is not None:
        # The step would refuse it; decided, it would spend the guard's counts for nothing.
        why = f"no hedge: {workload} {facts.rolling}; {subject} is judged as hung in its turn"
        return Ignored(RULE, subject, why, now)
    return Decision(
        action="hedge-pod",
        namespace=t.namespace,
        target=t.name,
        uid=t.uid,
        reason=(
            f"{stalled(stall, t.model or 'unknown', now, cfg.at)}; starting its replacement "
            "beside it: the first Ready of the two serves, the other is deleted"
        ),
        incident=hedge_incident(t.uid),
        at=now,
        workload=workload,
        params=(("timeout", f"{cfg.timeout_s:.0f}"),),
        pod_created_at=t.created,
        expected_cold_start_s=facts.expected_cold_start_s,
        replicas=facts.replicas,
        phase="engine_init",
        gpus=t.gpus or None,
        ready_created=facts.ready_created,
    )
