"""The guardrails in their fixed order; the first "no" wins.

    kill_switch -> idempotency -> dedup -> cooldown -> min_age -> blast_radius
                -> rate_limit -> dry_run

The kill switch first, so it says so plainly; then the stages that recognise a
repeat, so a duplicate is reported as a duplicate rather than as a cap hit; the
spending caps next, so a token or a slot of the blast radius is only used by a
decision that every other stage accepted; dry run last, so "would have" means
exactly what a live run would have done. Only a decision let through by every
stage (or held by dry run alone, which simulates the run) is recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from remediator.guard.blast_radius import BlastRadius
from remediator.guard.config import GuardConfig
from remediator.guard.cooldown import Cooldown
from remediator.guard.dedup import Dedup
from remediator.guard.dry_run import DryRun
from remediator.guard.idempotency import Idempotency
from remediator.guard.kill_switch import KillSwitch
from remediator.guard.min_age import MinAge
from remediator.guard.rate_limit import RateLimit
from remediator.guard.stage import Stage
from remediator.guard.state import GuardState
from remediator.policy.decision import Decision, Suppressed

ORDER: tuple[str, ...] = (
    "kill_switch",
    "idempotency",
    "dedup",
    "cooldown",
    "min_age",
    "blast_radius",
    "rate_limit",
    "dry_run",
)


@dataclass(frozen=True, slots=True)
class Pipeline:
    stages: tuple[Stage, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(stage.name for stage in self.stages)

    def run(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Decision | Suppressed, GuardState]:
        """The decision and the state with it recorded, or why not and the state unchanged."""
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        now = float(now)
        for stage in self.stages:
            verdict = stage.check(decision, now, state)
            if verdict.reason is None:
                continue
            held = Suppressed(decision, guardrail=stage.name, reason=verdict.reason)
            if stage.name != "dry_run":
                return held, state
            # A dry run passed every other guardrail: remember it as if it had run, so it
            # shows exactly what a live run would do, repeats and caps included.
            return held, self._record(decision, now, state)
        return decision, self._record(decision, now, state)

    def _record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        for stage in self.stages:
            state = stage.record(decision, now, state)
        return state


def build_pipeline(config: GuardConfig | None = None) -> Pipeline:
    config = config or GuardConfig()
    return Pipeline(
        stages=(
            KillSwitch(config.kill_switch),
            Idempotency(config.idempotency),
            Dedup(config.dedup),
            Cooldown(config.cooldown),
            MinAge(config.min_age),
            BlastRadius(config.blast_radius),
            RateLimit(config.rate_limit),
            DryRun(config.dry_run),
        )
    )
