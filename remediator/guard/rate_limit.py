"""rate_limit: a global token bucket on acting decisions.

`burst` tokens to start with, refilled at `per_minute` / 60 per second, capped at
`burst`; an action spends one. Pure over `now`: nothing sleeps, and a burst of
decisions at one instant gets exactly `burst` through (Argo Events' limiter lets
bursts pass; this one must not). Notify decisions are not rate limited here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, acts, fmt_s, suppress
from remediator.guard.state import GuardState, read_number, read_object


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    # By simulation (docs/simulation-defaults.md), with the blast radius: hung pods come in
    # waves (a scale-up's); with hung pods found by their step (spread over each pod's own
    # stretch), a burst of 3 is within seed noise of 10, and a default moves only that far.
    per_minute: float = field(default=6.0, metadata={"gt": 0})
    burst: int = field(default=3, metadata={"min": 1})  # 0 would silently stop everything


@dataclass(frozen=True, slots=True)
class RateLimitState:
    tokens: float | None = None  # None: a full bucket, nothing spent yet
    updated_at: float | None = None

    def to_doc(self) -> Any:
        return {"tokens": self.tokens, "updated_at": self.updated_at}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> RateLimitState:
        obj = read_object(value, path, {"tokens", "updated_at"})
        tokens, updated = obj.get("tokens"), obj.get("updated_at")
        return cls(
            tokens=None if tokens is None else read_number(tokens, f"{path}.tokens"),
            updated_at=None if updated is None else read_number(updated, f"{path}.updated_at"),
        )


@dataclass(frozen=True, slots=True)
class RateLimit:
    name: ClassVar[str] = "rate_limit"
    Config: ClassVar[type[Any]] = RateLimitConfig
    State: ClassVar[type[Any] | None] = RateLimitState
    simulates: ClassVar[bool] = False
    config: RateLimitConfig = RateLimitConfig()

    def tokens(self, state: RateLimitState, now: float) -> float:
        """Tokens in the bucket at `now`; a clock that steps back refills nothing."""
        if state.tokens is None or state.updated_at is None:
            return float(self.config.burst)
        elapsed = max(0.0, now - state.updated_at)
        return min(float(self.config.burst), state.tokens + elapsed * self.config.per_minute / 60)

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        left = self.tokens(state.of(self.name, RateLimitState), now)
        if left >= 1:
            return PASS
        wait = (1 - left) * 60 / self.config.per_minute
        return suppress(
            f"rate limit: {self.config.per_minute:g}/min with burst {self.config.burst} "
            f"spent; next action allowed in {fmt_s(wait)}",
            now,  # ask again at the next look
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        prior = state.of(self.name, RateLimitState)
        left = self.tokens(prior, now) - 1
        updated = now if prior.updated_at is None else max(now, prior.updated_at)
        return state.put(self.name, RateLimitState(tokens=left, updated_at=updated))
