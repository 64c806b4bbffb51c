from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.dedup import Dedup, DedupConfig, DedupState
from remediator.guard.state import GuardState

from .factory import T0, make, notify

STAGE = Dedup(DedupConfig(window_s=300))
SEEN = GuardState({"dedup": DedupState({"delete-pod ml/vllm-0": T0, "notify ml/vllm-0": T0})})


@pytest.mark.parametrize(
    ("decision", "now", "reason"),
    [
        # Alertmanager repeating the alert: same incident, same key
        (make(), T0 + 60, "duplicate: delete-pod ml/vllm-0 was let through 60s ago (window 300s)"),
        # a watch event and an alert for the same pod carry different incident ids
        (
            make(incident="watch-7"),
            T0 + 5,
            "duplicate: delete-pod ml/vllm-0 was let through 5s ago (window 300s)",
        ),
        (
            notify(reason="again"),
            T0 + 1,
            "duplicate: notify ml/vllm-0 was let through 1s ago (window 300s)",
        ),
        (
            make(),
            T0 + 299.5,
            "duplicate: delete-pod ml/vllm-0 was let through 300s ago (window 300s)",
        ),
        (make(), T0 + 300, None),  # the window is half-open
        (make(target="vllm-1"), T0 + 1, None),
        (make(namespace="ml2"), T0 + 1, None),
        (make(action="restart-warmup"), T0 + 1, None),
        (notify(target="vllm-1"), T0 + 1, None),
    ],
)
def test_check(decision: Decision, now: float, reason: str | None) -> None:
    assert STAGE.check(decision, now, SEEN).reason == reason


def test_window_zero_turns_dedup_off() -> None:
    assert Dedup(DedupConfig(window_s=0)).check(make(), T0, SEEN).passed


def test_record_remembers_and_forgets_expired() -> None:
    after = STAGE.record(make(target="vllm-1"), T0 + 300, SEEN)
    assert dict(after.of("dedup", DedupState).seen) == {"delete-pod ml/vllm-1": T0 + 300}
    assert len(SEEN.of("dedup", DedupState).seen) == 2


def test_record_keeps_notify_too() -> None:
    after = STAGE.record(notify(), T0, GuardState())
    assert STAGE.check(notify(incident="inc-9"), T0 + 1, after).reason is not None


def test_a_note_told_in_another_incidents_thread_is_neither_held_nor_counted() -> None:
    """A node found settled again, told under the message that said it was not, minutes
    after it: not a repeat of that message, and no repeat of it is held for it."""
    reply = notify(told_under="gpu-memory-1", incident="settled-1")
    assert STAGE.check(reply, T0 + 1, SEEN).passed
    assert STAGE.record(reply, T0 + 1, GuardState()) == GuardState()
    # A deletion told in a node's thread is still a deletion: repeats are held.
    delete = make(told_under="gpu-memory-1")
    assert STAGE.check(delete, T0 + 1, SEEN).reason is not None
