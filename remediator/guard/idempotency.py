"""idempotency: one incident, one action.

Incident ids are deterministic (same cause, same id), so a second decision for
an incident already acted on is a replay, a restart or a repeated alert. The
executor's deterministic workflow name (409 AlreadyExists) is the second line of
this defence; this one also holds while the workflow is gone from Argo.
Notify decisions are not actions and are left to dedup.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import PASS, Verdict, acts, fmt_time, suppress
from remediator.guard.state import GuardState, Stamps, prune, read_stamps


@dataclass(frozen=True, slots=True)
class IdempotencyConfig:
    retain_s: float = field(default=86400.0, metadata=NON_NEGATIVE)  # how long an id is kept


@dataclass(frozen=True, slots=True)
class IdempotencyState:
    acted: Stamps = field(default_factory=dict)  # incident id -> let through at

    def to_doc(self) -> Any:
        return {"acted": dict(self.acted)}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> IdempotencyState:
        return cls(read_stamps(value, path, "acted"))


@dataclass(frozen=True, slots=True)
class Idempotency:
    name: ClassVar[str] = "idempotency"
    Config: ClassVar[type[Any]] = IdempotencyConfig
    State: ClassVar[type[Any] | None] = IdempotencyState
    simulates: ClassVar[bool] = False
    config: IdempotencyConfig = IdempotencyConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        at = state.of(self.name, IdempotencyState).acted.get(decision.incident)
        if at is None or now - at >= self.config.retain_s:
            return PASS
        return suppress(f"already acted on incident {decision.incident} at {fmt_time(at)}")

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        acted = prune(state.of(self.name, IdempotencyState).acted, now, self.config.retain_s)
        acted[decision.incident] = now
        return state.put(self.name, IdempotencyState(acted))
