"""Progress-aware engine init: is a pod stuck in the vLLM step it is in, judged by what that
stretch took the model's siblings? Pure: the pod's timeline, the history, the config.

A stretch runs from the last step's line (or the container's start) to the next line that ends
a step; a vLLM start-up span counts as the lines of its step (inputs.vllm_spans). Siblings'
times for it are the durations of the step that line ended: the first step after the last one
ended that the siblings have times for (a V0 engine compiles nothing, so
after its weights come memory_profiling's times; a V1 engine logs nothing between sizing its KV
cache and ending graph capture, so there cuda_graphs' times judge kv_cache). A torch.compile
that missed its cache is judged only by siblings' compiles that missed it too: a cache hit
takes seconds, a miss minutes.

Before the first step line (engine_steps.BEFORE_FIRST_STEP) the engine logs its banner, then
starts its workers and NCCL, and says nothing until it loads its weights: a pod whose banner is
seen and no step line after it is judged by what the container's start to the first step line
took its siblings (those whose banner was seen too), with the same floor and
`FIRST_STRETCH_MARGIN` times the factor, so a hang in NCCL init is found by progress as well.
Without such siblings it is judged as in `weights`.

The factor widens when few siblings' times judge the stretch (`history.few_samples_margin`:
1.54 times with 5, none from a full window): a quantile of few samples understates the tail.
"""

from __future__ import annotations

from typing import Final

import msgspec

from remediator.inputs.vllm_log import COMPILE_MISSED, LOG_ENDED
from remediator.policy.config import ProgressConfig
from remediator.policy.history import PhaseHistory, step_key
from remediator.policy.pace import PACE_FROM, NodePaces, pace_of
from remediator.timeline.engine_steps import BEFORE_FIRST_STEP, TIMELINE_STEPS, TO_BANNER
from remediator.timeline.model import PodTimeline

# The stretch before the first step line judges a pod before anything it logged has told its
# pace: a pod slow everywhere (a slow node, a slow disk) is as far behind its siblings there as
# anywhere, with nothing said yet. At the factor every step gets (2), 2 of 200 random fleets in
# the simulator lost one healthy pod each there (a start twice the usual, 104 s against 2× the
# siblings' 42 s); at 1.5 times it (3) none did, and the example fleets' P99 moved by under 1%
# with 5% hangs (untuned 886 → 894 s; tuned, whose stretch is under the floor, not at all).
FIRST_STRETCH_MARGIN: Final = 1.5


# Stall and Pace are msgspec structs, built in C: a frozen dataclass's __init__ stays
# interpreted under mypyc and set each field through object.__setattr__ (~1.2 µs for Stall,
# built on every step line).
class Stall(msgspec.Struct, frozen=True, gc=False):
    """Where a pod's engine is, since when, and how long its siblings took there."""

    step: str  # where vLLM's log says the engine is
    began: float  # the last step's line, or the container's start
    limit: float  # seconds the stretch may take: max(floor, factor × pace × siblings' quantile)
    siblings_s: float  # the siblings' quantile for the stretch
    samples: int  # how many siblings' times that is from
    timed_as: str  # the step whose times those are
    factor: float  # the limit's multiple of the siblings' quantile (above the floor), pace in
    pace: float = 1.0  # how much the pod's pace, or its node's, widened it (`pace_of`)
    paced_by: str = ""  # whose pace widened it: the pod's own so far, or its node's

    @property
    def hedges(self) -> bool:
        """Whether a second pod could beat this one here. Not once vLLM has logged its API
        server started: its engine is up and only the readiness probe is left, which a second
        pod of the same spec would wait on as long (in the simulated untuned fleet a third of
        the hedges of healthy pods were there, each a cold start's GPUs charged for nothing)."""
        return self.step != "api_server"

    def due(self, checks: int, interval_s: float) -> float:
        """When the pod is hung: stalled for `checks` checks in a row."""
        return self.began + self.limit + (checks - 1) * interval_s

    def hedge_due(self, share: float) -> float:
        """When a hedge starts: the stretch has run `share` of its limit, widened by the
        pod's pace as the deletion's is. Timed by the siblings' limit alone, a hedge went for
        every pod on a slow node, healthy and moving, and the hedge budget those spent was
        not there for the hangs after: on the bench's tuned fleet with four nodes 3× slow and
        5% hangs (seeds 1-6, 3 h), 127 hedges of healthy pods against 78 of hung ones, and 78
        hung pods' hedges held; P99 150 s. Widened: 31 healthy, 117 hung, 39 held; 127 s.
        Without hangs that fleet's P99 went 92 → 98 s: a slow replica is one a hedge
        elsewhere may beat, but the budget is better spent on hangs."""
        return self.began + share * self.limit

    def reason(self, cfg: ProgressConfig, model: str, checks: int, now: float) -> str:
        """Which step stalled, and how its time compares with the siblings'."""
        what, there = f"in vLLM step {self.step}", "there"
        if self.timed_as == BEFORE_FIRST_STEP:
            what = "before vLLM's first step line (NCCL init)"
            there = "from their container's start to their first step line"
        elif self.timed_as != self.step:
            what += f" (timed as {self.timed_as})"
        slow = ""
        if self.pace > 1.0:
            slow = f", widened {self.pace:.3g}× by {self.paced_by} against its siblings'"
        return (
            f"engine_init stalled {what} for {now - self.began:.0f}s, over its "
            f"{self.limit:.0f}s limit for {checks} checks in a row: {self.samples} siblings "
            f"of {model} took {self.siblings_s:.0f}s {there} (P{cfg.quantile * 100:g}; limit "
            f"{self.factor:.3g}× that{slow}, at least {cfg.floor_s:.0f}s)"
        )


def stall_of(
    t: PodTimeline, cfg: ProgressConfig, history: PhaseHistory, nodes: NodePaces | None = None
) -> Stall | None:
    """The stretch the pod's engine is in, judged by its siblings (its limit widened by its
    pace, or its node's: `pace.pace_of`); None when progress is off, the pod's log says
    nothing, or too few siblings went through the stretch."""
    if not cfg.enabled or t.engine is None:
        return None
    started = t.started_at()
    if t.engine.end(LOG_ENDED, started, None) is not None:
        return None  # the log is no longer read: what the engine does now is unknown
    last = t.engine.last_end(started)
    began = last[1] if last is not None else started
    if began is None:
        return None
    # The container's start and the log lines are the kubelet's stamps, on the node's clock;
    # the stretch is timed on the API server's, as a phase budget is (a node an hour behind
    # would otherwise make every stretch look an hour old).
    began -= t.clock_skew()
    model = t.model or "unknown"
    after = TIMELINE_STEPS.index(last[0]) + 1 if last is not None else 0
    step = t.engine.current_after(last, started)
    if step in TIMELINE_STEPS and step != "api_server":  # (after its line: the readiness probe)
        # back in a step after a later one's line: a part compiled after the model's profiling
        # run (a draft head), the graphs' memory measured after it, the KV cache extended
        # after the capture; judged as that step, by the siblings' whole step, which took
        # theirs in
        after = min(after, TIMELINE_STEPS.index(step))
    timed_as = next((s for s in TIMELINE_STEPS[after:] if history.count(model, step_key(s))), None)
    first_key = step_key(BEFORE_FIRST_STEP)
    if (
        last is None
        and history.count(model, first_key) >= cfg.min_samples
        and t.engine.before_first_step(started)
    ):
        timed_as = BEFORE_FIRST_STEP  # (too few such siblings yet: judged as in `weights`)
    if timed_as is None:
        return None
    if timed_as == "torch_compile" and t.engine.compile_missed(started):
        timed_as = COMPILE_MISSED
    siblings = history.quantile(model, step_key(timed_as), cfg.quantile, cfg.min_samples)
    if siblings is None:
        return None
    samples = history.count(model, step_key(timed_as))
    factor = cfg.factor * (FIRST_STRETCH_MARGIN if timed_as == BEFORE_FIRST_STEP else 1.0)
    factor *= history.margin(model, step_key(timed_as))
    pace, paced_by = 1.0, ""
    # Its ended stretches sum to its last step line's time from its container's start: under
    # (PACE_FROM - 1) × the floor, no siblings' times can make its pace PACE_FROM. (A pod early
    # in its engine init stops here: 44% of the judging in bench_sim's speed run. The pace's
    # sums cost the simulator with the core 8% of its speed; with this, 6%.)
    if last is None or started is None or last[1] - started >= (PACE_FROM - 1.0) * cfg.floor_s:
        pace, paced_by = pace_of(t, cfg, history, model, started, nodes)
    return Stall(
        step=step,
        began=began,
        limit=max(cfg.floor_s, factor * pace * siblings),
        siblings_s=siblings,
        samples=samples,
        timed_as=timed_as,
        factor=factor * pace,
        pace=pace,
        paced_by=paced_by,
    )


class Pace(msgspec.Struct, frozen=True, gc=False):
    """How a pod's own engine has gone so far, where no sibling has timed its stretch."""

    moved: float  # its last step line, on the API server's clock
    longest: float  # the longest step it has ended in this run

    def limit(self, cfg: ProgressConfig, budget_s: float) -> float:
        """Seconds its stretch may last: `factor` times its longest step, at least the floor,
        at most the whole phase budget (no healthy stretch takes longer than that)."""
        return min(budget_s, max(cfg.floor_s, cfg.factor * self.longest))

    def due(self, cfg: ProgressConfig, budget_s: float) -> float:
        return self.moved + self.limit(cfg, budget_s)

    def note(self, cfg: ProgressConfig, budget_s: float, now: float) -> str:
        return (
            f"; {now - self.moved:.0f}s since its last step line, over its own pace "
            f"({self.limit(cfg, budget_s):.0f}s: {cfg.factor:g}× its longest step, "
            f"{self.longest:.0f}s, at least {cfg.floor_s:.0f}s; no sibling has timed this "
            "stretch yet)"
        )


def own_pace(t: PodTimeline, cfg: ProgressConfig) -> Pace | None:
    """The pod's pace in engine init: None when progress is off, its log is no longer read,
    or it has ended no step in this run.

    Where no sibling has timed the stretch it is in (a model's first wave), `stall_of`
    cannot judge it and the phase budget does; but a start that keeps ending steps is not
    killed for being slow overall (a slow registry's first pods: one 299 s init was deleted
    2 s before Ready, 8 s after its last step line, over a 277 s budget set from the one
    sibling's whole cold start). The budget holds it no longer than its pace allows."""
    if not cfg.enabled or t.engine is None:
        return None
    started = t.started_at()
    if t.engine.end(LOG_ENDED, started, None) is not None:
        return None
    last = t.engine.last_end(started)
    steps = t.engine.durations(started, None)
    if last is None or not steps:
        return None
    return Pace(last[1] - t.clock_skew(), max(steps.values()))


def learn_steps(t: PodTimeline, history: PhaseHistory) -> None:
    """What each vLLM step took a healthy cold start, beside its phases' times (a compile that
    missed its cache once more, as what such compiles take; where its banner is seen, the
    stretches to it and to its first step line)."""
    model = t.model or "unknown"
    steps = t.engine_steps()
    for step, seconds in steps.items():
        history.add(model, step_key(step), seconds)
    started = t.started_at()
    banner = t.engine.banner(started) if t.engine is not None else None
    if t.engine is not None and banner is not None and started is not None:
        history.add(model, step_key(TO_BANNER), max(0.0, banner - started))
        first = t.engine.first_step(started)
        if first is not None:
            history.add(model, step_key(BEFORE_FIRST_STEP), max(0.0, first - started))
    compiled = steps.get("torch_compile")
    if compiled is not None and t.engine is not None and t.engine.compile_missed(started):
        history.add(model, step_key(COMPILE_MISSED), compiled)


def stretches_ended(t: PodTimeline) -> dict[str, float]:
    """The stretches the pod's engine ended in this run, by step: its steps (a compile that
    missed its cache as COMPILE_MISSED), and the stretch to its first step line where its
    banner was seen (a deleted pod's, to set its replacement beside: `stopped_behind`)."""
    started = t.started_at()
    if t.engine is None or started is None:
        return {}
    ended = dict(t.engine.judged(started))  # (a copy: judged() is shared until the next line)
    first = t.engine.first_step(started)
    if first is not None and t.engine.banner(started) is not None:
        ended[BEFORE_FIRST_STEP] = max(0.0, first - started)
    return ended


def stopped_behind(
    t: PodTimeline, ahead: dict[str, float], cfg: ProgressConfig, now: float
) -> str | None:
    """Where the pod has sat in a stretch past `factor` times (at least the floor) what
    another pod took to end it (`ahead`: a pod of its workload deleted before it, by
    `stretches_ended`); None where its log is not read or that pod never ended it (a compile:
    never ended one that missed its cache).

    The kill-loop guard holds a replacement as slow as the pod deleted before it; one stopped
    where its predecessor went on is not slow, it is stuck (random fleet 1800, 20% hangs: a
    Mixtral pod hung in graph capture was deleted, its replacement hung in NCCL init, which
    its predecessor had ended in 10 s, and was held for the rest of the run with every pod of
    the workload after it)."""
    if not cfg.enabled or t.engine is None or not ahead:
        return None
    started = t.started_at()
    if started is None or t.engine.end(LOG_ENDED, started, None) is not None:
        return None
    last = t.engine.last_end(started)
    step = t.engine.current_after(last, started)
    # A compile is set beside a compile that missed its cache only: one that hit it takes
    # seconds, and whether this one misses may not be logged yet.
    took = ahead.get(COMPILE_MISSED if step == "torch_compile" else step)
    if took is None:
        return None
    began = (last[1] if last is not None else started) - t.clock_skew()
    limit = max(cfg.floor_s, cfg.factor * took)
    if now - began <= limit:
        return None
    return f"in {step} for {now - began:.0f}s, which the pod deleted before it ended in {took:.0f}s"
