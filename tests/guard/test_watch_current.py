"""watch_current: a pod deletion decided while the runtime's picture may lag is held, asked
again at the next look, and let through once caught up (issue 18: look again before acting)."""

from __future__ import annotations

import pytest

from remediator.contract.decision import Suppressed
from remediator.guard import GuardState, build_pipeline, hold
from remediator.guard.watch_current import WatchCurrent, WatchCurrentState

from .factory import T0, make

BEHIND = "watch Pod/ml relisting after a reconnect"


@pytest.mark.parametrize(
    ("action", "held"),
    [
        ("delete-pod", True),
        ("restart-warmup", False),
        ("verify-gpu-memory", False),
        ("cordon-node", False),
        ("notify", False),
    ],
)
def test_only_pod_deletions_are_held_while_behind(action: str, held: bool) -> None:
    verdict = WatchCurrent().check(make(action=action), T0, hold(GuardState(), BEHIND))
    assert verdict.passed is not held


def test_a_held_deletion_says_why_and_is_asked_again_at_the_next_look() -> None:
    verdict = WatchCurrent().check(make(), T0, hold(GuardState(), BEHIND))
    assert verdict.reason == (
        f"behind ({BEHIND}): delete-pod ml/vllm-0 held until the watch has caught up"
    )
    assert verdict.retry_at == T0


def test_in_the_pipeline_it_is_held_then_let_through_once_caught_up() -> None:
    pipeline = build_pipeline()
    result, state = pipeline.run(make(), T0, hold(GuardState(), BEHIND))
    assert isinstance(result, Suppressed) and result.guardrail == "watch_current"
    assert result.retry_at is not None  # held, not dropped
    assert state == hold(GuardState(), BEHIND)  # nothing spent, nothing remembered
    result, _ = pipeline.run(make(), T0 + 30, hold(state, ""))
    assert not isinstance(result, Suppressed)


def test_a_repeat_is_said_to_be_a_repeat_even_while_behind() -> None:
    pipeline = build_pipeline()
    _, state = pipeline.run(make(), T0, GuardState())
    result, _ = pipeline.run(make(), T0 + 1, hold(state, BEHIND))
    assert isinstance(result, Suppressed) and result.guardrail == "idempotency"


def test_caught_up_is_the_empty_state_and_round_trips() -> None:
    assert hold(GuardState(), "") == GuardState()
    behind = hold(GuardState(), BEHIND)
    kinds = build_pipeline().state_kinds
    assert GuardState.from_json(behind.to_json(), kinds) == behind
    assert behind.of("watch_current", WatchCurrentState).behind == BEHIND
