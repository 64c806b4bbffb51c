from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.pipeline import Pipeline
from remediator.guard.rate_limit import RateLimit, RateLimitConfig, RateLimitState
from remediator.guard.state import GuardState

from .factory import T0, make, notify

STAGE = RateLimit(RateLimitConfig(per_minute=6, burst=3))


def test_a_burst_of_100_at_one_instant_lets_exactly_burst_through() -> None:
    pipeline, state, passed = Pipeline((STAGE,)), GuardState(), 0
    for i in range(100):
        result, state = pipeline.run(make(incident=f"inc-{i}", target=f"p{i}"), T0, state)
        passed += isinstance(result, Decision)
    assert passed == 3


@pytest.mark.parametrize(
    ("tokens", "elapsed", "reason"),
    [
        (None, 0, None),  # a fresh bucket is full
        (2.0, 0, None),
        (1.0, 0, None),
        (0.0, 0, "rate limit: 6/min with burst 3 spent; next action allowed in 10s"),
        (0.0, 5, "rate limit: 6/min with burst 3 spent; next action allowed in 5s"),
        (0.0, 10, None),  # 6/min refills one token every 10 s
        (0.5, 5, None),
        (
            0.0,
            -30,
            "rate limit: 6/min with burst 3 spent; next action allowed in 10s",
        ),  # clock stepped back
    ],
)
def test_check(tokens: float | None, elapsed: float, reason: str | None) -> None:
    state = GuardState({"rate_limit": RateLimitState(tokens=tokens, updated_at=T0)})
    assert STAGE.check(make(), T0 + elapsed, state).reason == reason


@pytest.mark.parametrize(
    ("tokens", "elapsed", "left"),
    [(None, 0, 2.0), (3.0, 0, 2.0), (0.0, 10, 0.0), (1.0, 3600, 2.0), (2.5, 0, 1.5)],
)
def test_bucket_refills_up_to_burst(tokens: float | None, elapsed: float, left: float) -> None:
    state = GuardState({"rate_limit": RateLimitState(tokens=tokens, updated_at=T0)})
    after = STAGE.record(make(), T0 + elapsed, state)
    assert after.of("rate_limit", RateLimitState).tokens == pytest.approx(left)
    assert after.of("rate_limit", RateLimitState).updated_at == T0 + elapsed


def test_notify_is_neither_limited_nor_spends_a_token() -> None:
    empty = GuardState({"rate_limit": RateLimitState(tokens=0.0, updated_at=T0)})
    assert STAGE.check(notify(), T0, empty).passed
    assert STAGE.record(notify(), T0, empty) is empty


def test_steady_stream_at_the_rate_is_let_through() -> None:
    pipeline, state, passed = Pipeline((STAGE,)), GuardState(), 0
    for i in range(60):  # one decision every 10 s for 10 minutes, after the burst is spent
        result, state = pipeline.run(make(incident=f"inc-{i}"), T0 + 10 * i, state)
        passed += isinstance(result, Decision)
    assert passed == 60
