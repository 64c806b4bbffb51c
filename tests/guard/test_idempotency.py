from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.idempotency import Idempotency, IdempotencyConfig, IdempotencyState
from remediator.guard.state import GuardState

from .factory import T0, make, notify

STAGE = Idempotency(IdempotencyConfig(retain_s=3600))
ACTED = GuardState({"idempotency": IdempotencyState({"inc-1": T0})})


@pytest.mark.parametrize(
    ("decision", "now", "reason"),
    [
        (make(), T0 + 1, "already acted on incident inc-1 at 2023-11-14T22:13:20Z"),
        # the same incident through another action is still the same incident
        (
            make(action="restart-warmup"),
            T0 + 1,
            "already acted on incident inc-1 at 2023-11-14T22:13:20Z",
        ),
        (make(incident="inc-2"), T0 + 1, None),
        (make(), T0 + 3599, "already acted on incident inc-1 at 2023-11-14T22:13:20Z"),
        (make(), T0 + 3600, None),  # forgotten after retain_s
        (notify(), T0 + 1, None),  # notes are dedup's business
    ],
)
def test_check(decision: Decision, now: float, reason: str | None) -> None:
    assert STAGE.check(decision, now, ACTED).reason == reason


def test_nothing_acted_on_passes() -> None:
    assert STAGE.check(make(), T0, GuardState()).passed


def test_record_remembers_and_forgets_expired() -> None:
    state = GuardState({"idempotency": IdempotencyState({"old": T0 - 3600, "young": T0 - 10})})
    after = STAGE.record(make(), T0, state)
    assert dict(after.of("idempotency", IdempotencyState).acted) == {"young": T0 - 10, "inc-1": T0}
    assert dict(state.of("idempotency", IdempotencyState).acted) == {
        "old": T0 - 3600,
        "young": T0 - 10,
    }  # not mutated


def test_record_ignores_notify() -> None:
    assert STAGE.record(notify(), T0, GuardState()) == GuardState()
