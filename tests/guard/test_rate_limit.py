from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision, Suppressed
from remediator.guard.pipeline import Pipeline
from remediator.guard.rate_limit import RateLimit, RateLimitConfig, RateLimitState
from remediator.guard.state import GuardState, StateError

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


# ---- the queue: a held decision is kept a place, and goes at its turn ------------------------
def _queue(state: GuardState) -> tuple[tuple[str, float], ...]:
    return state.of("rate_limit", RateLimitState).queue


def test_held_decisions_are_queued_in_turn_each_at_its_own_token() -> None:
    pipeline, state = Pipeline((STAGE,)), GuardState()
    held: list[Suppressed] = []
    for i in range(6):  # six at one instant: three tokens, three places
        result, state = pipeline.run(make(incident=f"inc-{i}"), T0, state)
        if isinstance(result, Suppressed):
            held.append(result)
    assert [h.decision.incident for h in held] == ["inc-3", "inc-4", "inc-5"]
    assert [h.retry_at for h in held] == [T0 + 10, T0 + 20, T0 + 30]  # 6/min: 10 s a token
    assert all(h.queued for h in held)
    assert "queued 1st, its turn at 2023-11-14T22:13:30Z (in 10s)" in held[0].reason
    assert "queued 3rd" in held[2].reason
    for h in held:  # asked again at its turn, each goes; asked early, it is still held
        early, state = pipeline.run(h.decision, h.retry_at - 1, state)  # type: ignore[operator]
        assert isinstance(early, Suppressed) and early.retry_at == h.retry_at
        result, state = pipeline.run(h.decision, h.retry_at, state)  # type: ignore[arg-type]
        assert result == h.decision
    assert _queue(state) == ()


def test_a_decision_held_later_waits_behind_the_queue() -> None:
    """At T0 + 10 the first place's token is there: a newcomer may not take it."""
    pipeline, state = Pipeline((STAGE,)), GuardState()
    for i in range(4):
        _, state = pipeline.run(make(incident=f"inc-{i}"), T0, state)
    late, state = pipeline.run(make(incident="late"), T0 + 10, state)
    assert isinstance(late, Suppressed) and late.retry_at == T0 + 20 and late.queued


def test_a_place_not_taken_is_given_up_and_its_token_is_anyone_s() -> None:
    pipeline, state = Pipeline((STAGE,)), GuardState()
    for i in range(4):
        _, state = pipeline.run(make(incident=f"inc-{i}"), T0, state)
    assert _queue(state) == (("inc-3", T0 + 10),)
    # inc-3 never comes back (its pod became Ready); a token's time after its turn, its
    # place is gone and the token it was waiting for is in the bucket: two are at T0 + 20.
    for name in ("a", "b"):
        result, state = pipeline.run(make(incident=name), T0 + 20.5, state)
        assert isinstance(result, Decision), result
    assert _queue(state) == ()


def test_queued_state_round_trips_and_an_old_state_reads() -> None:
    state = RateLimitState(tokens=-1.5, updated_at=T0, queue=(("inc-1", T0 + 5), ("b", T0 + 15)))
    assert RateLimitState.from_doc(state.to_doc(), "rate_limit") == state
    assert RateLimitState.from_doc({"tokens": 1.0, "updated_at": T0}, "r").queue == ()
    with pytest.raises(StateError, match=r"rate_limit\.queue\[0\]"):
        RateLimitState.from_doc({"tokens": 1.0, "updated_at": T0, "queue": [["x"]]}, "rate_limit")


@settings(max_examples=200, deadline=None)
@given(
    arrivals=st.lists(
        st.tuples(st.floats(0, 300, allow_nan=False), st.booleans()), min_size=1, max_size=40
    ),
    per_minute=st.sampled_from([1.0, 6.0, 30.0]),
    burst=st.integers(1, 5),
)
def test_the_queue_never_lets_more_through_than_the_bucket(
    arrivals: list[tuple[float, bool]], per_minute: float, burst: int
) -> None:
    """Whatever comes when, and whether a held decision comes back at its turn or never:
    any window lets through at most `burst` plus what the rate refills in it, and every
    decision that comes back at its turn goes then."""
    pipeline = Pipeline((RateLimit(RateLimitConfig(per_minute=per_minute, burst=burst)),))
    state, went = GuardState(), []
    pending: list[tuple[float, int, Decision]] = []  # (turn, order, decision) to come back
    events = sorted((at, i, comes_back) for i, (at, comes_back) in enumerate(arrivals))
    queue: list[tuple[float, int, Decision | None, bool]] = [
        (at, i, None, back) for at, i, back in events
    ]
    order = len(queue)
    while queue or pending:
        queue.sort(key=lambda e: (e[0], e[1]))
        pending.sort(key=lambda e: (e[0], e[1]))
        if pending and (not queue or pending[0][:2] < queue[0][:2]):
            turn, _, decision = pending.pop(0)
            result, state = pipeline.run(decision, turn, state)
            assert result == decision, f"came back at its turn {turn} and was held again"
            went.append(turn)
            continue
        at, i, _, back = queue.pop(0)
        decision = make(incident=f"inc-{i}", at=at)
        result, state = pipeline.run(decision, at, state)
        if isinstance(result, Decision):
            went.append(at)
        elif back:
            assert result.queued and result.retry_at is not None and result.retry_at >= at
            order += 1
            pending.append((result.retry_at, order, decision))
    went.sort()
    for a in range(len(went)):
        for b in range(a, len(went)):
            allowed = burst + (went[b] - went[a]) * per_minute / 60
            assert b - a + 1 <= allowed + 1e-6, (went[a], went[b], b - a + 1, allowed)


def test_a_hedge_held_keeps_no_place_to_hold_up_the_deletions_behind_it() -> None:
    """A held hedge is not asked again (one look per stall): a place kept for it would be
    given up only a token's time after its turn, and hold up every deletion behind it."""
    pipeline, state = Pipeline((STAGE,)), GuardState()
    for i in range(3):
        _, state = pipeline.run(make(incident=f"inc-{i}"), T0, state)
    hedge, state = pipeline.run(make(action="hedge-pod", incident="hedge-1"), T0, state)
    assert isinstance(hedge, Suppressed) and not hedge.queued and _queue(state) == ()
    deletion, state = pipeline.run(make(incident="inc-3"), T0, state)
    assert isinstance(deletion, Suppressed) and deletion.retry_at == T0 + 10
