"""dry_run: decide everything, do nothing; the output still shows each action.

It `simulates`: a decision it holds passed every other guardrail and is recorded as if
it had run, so "would have" means exactly what a live run would have done."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, acts, describe, suppress
from remediator.guard.state import GuardState


@dataclass(frozen=True, slots=True)
class DryRunConfig:
    enabled: bool = False


@dataclass(frozen=True, slots=True)
class DryRun:
    name: ClassVar[str] = "dry_run"
    Config: ClassVar[type[Any]] = DryRunConfig
    State: ClassVar[type[Any] | None] = None
    simulates: ClassVar[bool] = True
    config: DryRunConfig = DryRunConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if self.config.enabled and acts(decision):
            return suppress(f"dry-run: would {describe(decision)}")
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state
