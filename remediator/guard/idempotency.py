"""idempotency: one incident, one action.

Incident ids are deterministic (same cause, same id), so a second decision for
an incident already acted on is a replay, a restart or a repeated alert. The
executor's deterministic workflow name (409 AlreadyExists) is the second line of
this defence; this one also holds while the workflow is gone from Argo.
Notify decisions are not actions and are left to dedup.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from remediator.guard.config import IdempotencyConfig
from remediator.guard.stage import PASS, Verdict, acts, fmt_time, suppress
from remediator.guard.state import GuardState, IdempotencyState, prune
from remediator.policy.decision import Decision


@dataclass(frozen=True, slots=True)
class Idempotency:
    name: ClassVar[str] = "idempotency"
    config: IdempotencyConfig = IdempotencyConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        at = state.idempotency.acted.get(decision.incident)
        if at is None or now - at >= self.config.retain_s:
            return PASS
        return suppress(f"already acted on incident {decision.incident} at {fmt_time(at)}")

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        acted = prune(state.idempotency.acted, now, self.config.retain_s)
        acted[decision.incident] = now
        return replace(state, idempotency=IdempotencyState(acted))
