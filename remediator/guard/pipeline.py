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

STAGES: tuple[StageClass, ...] = (
    KillSwitch,
    Idempotency,
    Dedup,
    WatchCurrent,
    Cooldown,
    MinAge,
    BlastRadius,
    CordonCap,
    HedgeBudget,
    RateLimit,
    DryRun,
)

ORDER: tuple[str, ...] = tuple(cls.name for cls in STAGES)
CONFIGS: dict[str, type[Any]] = {cls.name: cls.Config for cls in STAGES}


@dataclass(frozen=True, slots=True)
class Pipeline:
    stages: tuple[Stage, ...]
    # (position, stage) of the stages that know when they will say yes (see `_retry_at`).
    _until: tuple[tuple[int, HoldsUntil], ...] = field(init=False, repr=False, compare=False)
    # The stages that keep a held decision a place (the rate limit's queue), by position.
    _queues: dict[int, Queues] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
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
        (but for the place a queueing stage keeps it)."""
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        now = float(now)
        for i, stage in enumerate(self.stages):
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
            if not stage.simulates:
                return held, state
            # A dry run passed every other guardrail: remember it as if it had run, so it
            # shows exactly what a live run would do, repeats and caps included.
            return held, self._record(decision, now, state)
        return decision, self._record(decision, now, state)

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

    def _record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        for stage in self.stages:
            state = stage.record(decision, now, state)
        return state


def parse_guardrails(mapping: Mapping[str, Any] | None) -> GuardConfig:
    """The policy file's `guardrails:` section, against the stages as built."""
    return parse_guard_config(mapping, CONFIGS)


def build_pipeline(config: GuardConfig | None = None) -> Pipeline:
    config = config or GuardConfig()
    return Pipeline(tuple(cls(config.of(cls.name, cls.Config)) for cls in STAGES))
