"""The guardrails in their fixed order; the first "no" wins.

    kill_switch -> dry_run -> idempotency -> dedup -> cooldown -> min_age
                -> blast_radius -> rate_limit

Cheap global switches first, so a kill switch or dry run says so plainly; then
the stages that recognise a repeat, so a duplicate is reported as a duplicate
rather than as a cap hit; the spending caps last, so a token or a slot of the
blast radius is only used by a decision that every other stage accepted.
Only a decision let through by every stage is recorded, in every stage.
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
    "dry_run",
    "idempotency",
    "dedup",
    "cooldown",
    "min_age",
    "blast_radius",
    "rate_limit",
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
            if verdict.reason is not None:
                return Suppressed(decision, guardrail=stage.name, reason=verdict.reason), state
        for stage in self.stages:
            state = stage.record(decision, now, state)
        return decision, state


def build_pipeline(config: GuardConfig | None = None) -> Pipeline:
    config = config or GuardConfig()
    return Pipeline(
        stages=(
            KillSwitch(config.kill_switch),
            DryRun(config.dry_run),
            Idempotency(config.idempotency),
            Dedup(config.dedup),
            Cooldown(config.cooldown),
            MinAge(config.min_age),
            BlastRadius(config.blast_radius),
            RateLimit(config.rate_limit),
        )
    )
