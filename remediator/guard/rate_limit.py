"""rate_limit: a global token bucket on acting decisions, with a queue.

`burst` tokens to start with, refilled at `per_minute` / 60 per second, capped at
`burst`; an action spends one. Pure over `now`: nothing sleeps, and a burst of
decisions at one instant gets exactly `burst` through (Argo Events' limiter lets
bursts pass; this one must not). Notify decisions are not rate limited here.

A decision held for want of a token is kept a place (`queue`): its turn is when the bucket
will have refilled a token for it and for every place ahead of it, so the decisions held go
in the order they were held, each at its own token's time, asked again once
(`Suppressed.queued`: the engine looks again exactly then, not a check later). A decision
that has no place may take a token only while the bucket holds more than the places kept
(it waits behind them). A place not taken within one token's time of its turn (the pod
became Ready meanwhile, or another guardrail held it when it came back) is given up. Every
decision let through spends a token the bucket holds, so any window of time lets through at
most `burst` plus what the rate refills in it, as without a queue
(tests/guard/test_rate_limit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, acts, fmt_s, fmt_time, starts_pods, suppress
from remediator.guard.state import GuardState, read_number, read_object, read_pairs


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    # By simulation (docs/simulation-defaults.md), with the blast radius: hung pods come in
    # waves (a scale-up's); with hung pods found by their step (spread over each pod's own
    # stretch), a burst of 3 is within seed noise of 10, and a default moves only that far.
    # 12 a minute, not the 6 the search keeps: a first wave of 50-60 pods with a fifth hung
    # queued its deletions behind 6 a minute in random fleets (defaults.py, `_RATE`).
    per_minute: float = field(default=12.0, metadata={"gt": 0})
    burst: int = field(default=3, metadata={"min": 1})  # 0 would silently stop everything


@dataclass(frozen=True, slots=True)
class RateLimitState:
    tokens: float | None = None  # None: a full bucket, nothing spent yet
    updated_at: float | None = None
    # Places kept for decisions held, in turn: (incident, when its token is there).
    queue: tuple[tuple[str, float], ...] = ()

    def to_doc(self) -> Any:
        doc: dict[str, Any] = {"tokens": self.tokens, "updated_at": self.updated_at}
        if self.queue:
            doc["queue"] = [list(place) for place in self.queue]
        return doc

    @classmethod
    def from_doc(cls, value: Any, path: str) -> RateLimitState:
        obj = read_object(value, path, {"tokens", "updated_at", "queue"})
        tokens, updated = obj.get("tokens"), obj.get("updated_at")
        return cls(
            tokens=None if tokens is None else read_number(tokens, f"{path}.tokens"),
            updated_at=None if updated is None else read_number(updated, f"{path}.updated_at"),
            queue=read_pairs(obj.get("queue", []), f"{path}.queue", "[incident, turn]"),
        )


_ROUNDING = 1e-9  # tokens: a turn computed in floating point may land a hair early


def _place(queue: tuple[tuple[str, float], ...], incident: str) -> tuple[int, float] | None:
    """The decision's place in the queue (its index, its turn), if it has one."""
    for i, (kept, turn) in enumerate(queue):
        if kept == incident:
            return i, turn
    return None


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True, slots=True)
class RateLimit:
    name: ClassVar[str] = "rate_limit"
    Config: ClassVar[type[Any]] = RateLimitConfig
    State: ClassVar[type[Any] | None] = RateLimitState
    simulates: ClassVar[bool] = False
    config: RateLimitConfig = RateLimitConfig()

    @property
    def _interval(self) -> float:
        """Seconds one token takes to come back."""
        return 60 / self.config.per_minute

    def tokens(self, state: RateLimitState, now: float) -> float:
        """Tokens in the bucket at `now`; a clock that steps back refills nothing."""
        if state.tokens is None or state.updated_at is None:
            return float(self.config.burst)
        elapsed = max(0.0, now - state.updated_at)
        return min(float(self.config.burst), state.tokens + elapsed * self.config.per_minute / 60)

    def _live(self, state: RateLimitState, now: float) -> tuple[tuple[str, float], ...]:
        """The places still kept at `now`: not past their turn by a token's time."""
        return tuple(place for place in state.queue if place[1] + self._interval >= now)

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        bucket = state.of(self.name, RateLimitState)
        live = self._live(bucket, now)
        left = self.tokens(bucket, now)
        place = _place(live, decision.incident)
        if place is not None:
            if place[1] > now:  # asked again before its turn
                return self._queued(place, now)
            if left >= 1 - _ROUNDING:  # (its turn is computed: the token is there then)
                return PASS
            # Its token went to a place ahead of it that came back late: a turn later.
        elif left - len(live) >= 1:
            return PASS
        wait = (1 + len(live) - left) * 60 / self.config.per_minute
        return suppress(
            f"rate limit: {self.config.per_minute:g}/min with burst {self.config.burst} "
            f"spent; next action allowed in {fmt_s(wait)}",
            now,  # (the pipeline keeps it a place: `queue`)
        )

    def queue(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Verdict, GuardState] | None:
        """Keep the held decision a place (or find the one it has, moved to the back if its
        turn has come and gone without a token): its turn, and the state with it kept. None
        for a hedge: held, it is not asked again (one look per stall, policy/hedge.py), so
        a place kept for it would only hold up the decisions behind it."""
        if starts_pods(decision):
            return None
        bucket = state.of(self.name, RateLimitState)
        live = self._live(bucket, now)
        place = _place(live, decision.incident)
        if place is None or place[1] <= now:
            ahead = tuple(p for p in live if p[0] != decision.incident)
            turn = self._turn(self.tokens(bucket, now), ahead, now)
            live = (*ahead, (decision.incident, turn))
            place = (len(live) - 1, turn)
        kept = RateLimitState(bucket.tokens, bucket.updated_at, live)
        return self._queued(place, now), state.put(self.name, kept)

    def _turn(self, tokens: float, ahead: tuple[tuple[str, float], ...], now: float) -> float:
        """When a token is there for one more place: each place ahead takes its token at its
        turn (or once one is there), the bucket refilling meanwhile up to `burst` (a full
        bucket waiting for a place's turn refills nothing)."""
        rate = self.config.per_minute / 60
        t, level = now, tokens
        for _, turn in ahead:
            took = max(turn, t + max(0.0, 1 - level) / rate)
            level = min(float(self.config.burst), level + (took - t) * rate) - 1
            t = took
        return t + max(0.0, 1 - level) / rate

    def _queued(self, place: tuple[int, float], now: float) -> Verdict:
        index, turn = place
        return suppress(
            f"rate limit: {self.config.per_minute:g}/min with burst {self.config.burst} "
            f"spent; queued {_ordinal(index + 1)}, its turn at {fmt_time(turn)} "
            f"(in {fmt_s(turn - now)})",
            turn,
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        prior = state.of(self.name, RateLimitState)
        left = self.tokens(prior, now) - 1
        updated = now if prior.updated_at is None else max(now, prior.updated_at)
        live = tuple(p for p in self._live(prior, now) if p[0] != decision.incident)
        return state.put(self.name, RateLimitState(tokens=left, updated_at=updated, queue=live))
