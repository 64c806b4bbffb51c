"""The guardrails in their fixed order; the first "no" wins.

    kill_switch -> idempotency -> dedup -> watch_current -> cooldown -> min_age
                -> blast_radius -> cordon_cap -> hedge_budget -> rate_limit -> dry_run

The kill switch first, so it says so plainly; then the stages that recognise a
repeat, so a duplicate is reported as a duplicate rather than as a cap hit; then the
hold while the runtime's picture may lag the cluster's (a "not yet" for any pod); the
spending caps next, so a token or a slot of the blast radius is only used by a
decision that every other stage accepted; dry run last, so "would have" means
exactly what a live run would have done. Only a decision let through by every
stage (or held by a stage that simulates, i.e. dry run) is recorded.

`STAGES` is the one place the order is written: adding a stage is its file and one
line here (docs/architecture.md). Everything else (ORDER, the config sections the
policy file accepts, the state records) is derived from it.

Two tiers. The first, `WORKLOAD_STAGES`, remembers only what was let through for the
decision's own workload (`blast_radius.workload_key`: its incident, its target, its pods)
or what the runtime sets for every workload alike (the kill switch, the watch's lag); the
second, `CLUSTER_STAGES`, holds what every workload spends together (the cluster-wide
blast radius, the cordon cap, the hedge budget, the rate limit) and the dry run. Judged
apart (`admit`, then `settle`, then `commit`), a decision's verdict is the one `run`
gives, provided each workload's decisions are admitted in order, one at a time (the next
only once the last is settled and committed), and the cluster tier settles every
workload's in time order: a runtime may then split the first tier by workload
(tests/guard/test_tiers.py holds it to that).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from remediator.contract.decision import Decision, Suppressed
from remediator.guard.blast_radius import BlastRadius
from remediator.guard.config import GuardConfig, parse_guard_config
from remediator.guard.cooldown import Cooldown
from remediator.guard.cordon_cap import CordonCap
from remediator.guard.dedup import Dedup
from remediator.guard.dry_run import DryRun
from remediator.guard.hedge_budget import HedgeBudget
from remediator.guard.idempotency import Idempotency
from remediator.guard.kill_switch import KillSwitch
from remediator.guard.min_age import MinAge
from remediator.guard.rate_limit import RateLimit
from remediator.guard.stage import HoldsUntil, Queues, Stage, StageClass, Verdict
from remediator.guard.state import GuardState, Record
from remediator.guard.watch_current import WatchCurrent

WORKLOAD_STAGES: tuple[StageClass, ...] = (
    KillSwitch,
    Idempotency,
    Dedup,
    WatchCurrent,
    Cooldown,
    MinAge,
)
CLUSTER_STAGES: tuple[StageClass, ...] = (
    BlastRadius,
    CordonCap,
    HedgeBudget,
    RateLimit,
    DryRun,
)
STAGES: tuple[StageClass, ...] = (*WORKLOAD_STAGES, *CLUSTER_STAGES)

ORDER: tuple[str, ...] = tuple(cls.name for cls in STAGES)
CONFIGS: dict[str, type[Any]] = {cls.name: cls.Config for cls in STAGES}


@dataclass(frozen=True, slots=True)
class Pipeline:
    """`workload_tier`: how many of the first stages are the workload tier (none: the whole
    pipeline is one tier, judged by `settle`)."""

    stages: tuple[Stage, ...]
    workload_tier: int = 0
    # (position, stage) of the stages that know when they will say yes (see `_retry_at`).
    _until: tuple[tuple[int, HoldsUntil], ...] = field(init=False, repr=False, compare=False)
    # The stages that keep a held decision a place (the rate limit's queue), by position.
    _queues: dict[int, Queues] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0 <= self.workload_tier <= len(self.stages):
            raise ValueError(f"workload_tier {self.workload_tier} is not 0..{len(self.stages)}")
        simulating = [s.name for s in self.stages[: self.workload_tier] if s.simulates]
        if simulating:  # its "would have" must have passed every stage after it, both tiers
            raise ValueError(f"a simulating stage must be in the cluster tier: {simulating}")
        until = tuple((i, s) for i, s in enumerate(self.stages) if isinstance(s, HoldsUntil))
        object.__setattr__(self, "_until", until)
        queues = {i: s for i, s in enumerate(self.stages) if isinstance(s, Queues)}
        object.__setattr__(self, "_queues", queues)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    @property
    def state_kinds(self) -> Mapping[str, type[Record]]:
        """Stage name -> its state record type, for reading stored state back."""
        return {s.name: kind for s in self.stages if (kind := getattr(s, "State", None))}

    def load_state(self, text: str | bytes) -> GuardState:
        return GuardState.from_json(text, self.state_kinds)

    def run(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Decision | Suppressed, GuardState]:
        """The decision and the state with it recorded, or why not and the state unchanged
        (but for the place a queueing stage keeps it): both tiers, one after the other."""
        held, state = self.admit(decision, now, state)
        if held is not None:
            return held, state
        result, state = self.settle(decision, now, state)
        if isinstance(result, Suppressed) and not result.simulated:
            return result, state
        return result, self.commit(decision, now, state)

    def admit(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Suppressed | None, GuardState]:
        """The workload tier's "no" (and its state, changed only by a place kept), or None:
        on to `settle`. Reads the workload tier's records of the decision's workload."""
        return self._judge(decision, _finite(now), state, 0, self.workload_tier)

    def settle(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Decision | Suppressed, GuardState]:
        """The cluster tier's verdict on a decision `admit` let on, and the cluster tier's
        state, with the decision recorded where it got through (or a dry run held it)."""
        now = _finite(now)
        held, state = self._judge(decision, now, state, self.workload_tier, len(self.stages))
        if held is not None and not held.simulated:
            return held, state
        return held or decision, self._record(decision, now, state, self.workload_tier, None)

    def commit(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        """The workload tier's record of a decision `settle` let through (or a dry run held:
        remembered as if it had run, so it shows what a live run would do)."""
        return self._record(decision, _finite(now), state, 0, self.workload_tier)

    def _judge(
        self, decision: Decision, now: float, state: GuardState, first: int, end: int
    ) -> tuple[Suppressed | None, GuardState]:
        """The first "no" of stages[first:end], with the place a queueing stage keeps it."""
        for i in range(first, end):
            stage = self.stages[i]
            verdict = stage.check(decision, now, state)
            if verdict.reason is None:
                continue
            reason, queue = verdict.reason, self._queues.get(i)
            placed = queue.queue(decision, now, state) if queue is not None else None
            if placed is not None:
                verdict, state = placed
                reason = verdict.reason or reason
            retry_at = self._retry_at(verdict, decision, now, i)
            held = Suppressed(
                decision, stage.name, reason, retry_at, stage.simulates, placed is not None
            )
            return held, state
        return None, state

    def _retry_at(
        self, first: Verdict, decision: Decision, now: float, held_by: int
    ) -> float | None:
        """No earlier than any later stage that knows a later time allows (`not_before`): a
        pod held by the kill switch is looked at again when min_age would let it go."""
        if first.retry_at is None:
            return None
        at = first.retry_at
        for i, stage in self._until:
            if i > held_by:
                later = stage.not_before(decision, now)
                if later is not None and later > at:
                    at = later
        return at

    def _record(
        self, decision: Decision, now: float, state: GuardState, first: int, end: int | None
    ) -> GuardState:
        for stage in self.stages[first:end]:
            state = stage.record(decision, now, state)
        return state


def _finite(now: float) -> float:
    if not math.isfinite(now):
        raise ValueError(f"now must be a finite number of seconds, got {now!r}")
    return float(now)


def parse_guardrails(mapping: Mapping[str, Any] | None) -> GuardConfig:
    """The policy file's `guardrails:` section, against the stages as built."""
    return parse_guard_config(mapping, CONFIGS)


def build_pipeline(config: GuardConfig | None = None) -> Pipeline:
    config = config or GuardConfig()
    stages = tuple(cls(config.of(cls.name, cls.Config)) for cls in STAGES)
    return Pipeline(stages, workload_tier=len(WORKLOAD_STAGES))
