"""dry_run: decide everything, do nothing; the output still shows each action."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from remediator.guard.config import DryRunConfig
from remediator.guard.stage import PASS, Verdict, acts, describe, suppress
from remediator.guard.state import GuardState
from remediator.policy.decision import Decision


@dataclass(frozen=True, slots=True)
class DryRun:
    name: ClassVar[str] = "dry_run"
    config: DryRunConfig = DryRunConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if self.config.enabled and acts(decision):
            return suppress(f"dry-run: would {describe(decision)}")
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state
