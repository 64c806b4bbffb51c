"""rate_limit: a global token bucket on acting decisions.

`burst` tokens to start with, refilled at `per_minute` / 60 per second, capped at
`burst`; an action spends one. Pure over `now`: nothing sleeps, and a burst of
decisions at one instant gets exactly `burst` through (Argo Events' limiter lets
bursts pass; this one must not). Notify decisions are not rate limited here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from remediator.guard.config import RateLimitConfig
from remediator.guard.stage import PASS, Verdict, acts, fmt_s, suppress
from remediator.guard.state import GuardState, RateLimitState
from remediator.policy.decision import Decision


@dataclass(frozen=True, slots=True)
class RateLimit:
    name: ClassVar[str] = "rate_limit"
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
        left = self.tokens(state.rate_limit, now)
        if left >= 1:
            return PASS
        wait = (1 - left) * 60 / self.config.per_minute
        return suppress(
            f"rate limit: {self.config.per_minute:g}/min with burst {self.config.burst} "
            f"spent; next action allowed in {fmt_s(wait)}"
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        prior = state.rate_limit
        left = self.tokens(prior, now) - 1
        updated = now if prior.updated_at is None else max(now, prior.updated_at)
        return replace(state, rate_limit=RateLimitState(tokens=left, updated_at=updated))
