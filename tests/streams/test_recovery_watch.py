"""A table restore that reads nothing for `stall_s` is stalled; one that reads on, however
slowly, or has nothing left, never is (remediator.streams.recovery_watch)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remediator.streams.recovery_watch import RecoveryWatch, Stalled


def test_a_restore_that_reads_nothing_for_stall_s_is_stalled() -> None:
    watch = RecoveryWatch(stall_s=60.0)
    watch.sample(7, now=100.0)
    watch.sample(7, now=159.0)
    assert watch.stalled(159.9) is None
    assert watch.stalled(160.0) == Stalled(remaining=7, for_s=60.0)


def test_reading_one_record_starts_the_wait_again() -> None:
    watch = RecoveryWatch(stall_s=60.0)
    watch.sample(7, now=100.0)
    watch.sample(6, now=150.0)
    assert watch.stalled(200.0) is None
    assert watch.stalled(210.0) == Stalled(remaining=6, for_s=60.0)


def test_a_restore_done_or_none_is_never_stalled() -> None:
    watch = RecoveryWatch(stall_s=60.0)
    assert watch.stalled(1e9) is None
    watch.sample(7, now=100.0)
    watch.sample(0, now=101.0)
    assert watch.stalled(1e9) is None


def test_stall_s_zero_never_stalls() -> None:
    watch = RecoveryWatch(stall_s=0.0)
    watch.sample(7, now=0.0)
    assert watch.stalled(1e9) is None


@given(st.lists(st.integers(0, 5), min_size=1, max_size=50))
def test_a_restore_that_reads_every_tick_is_never_stalled(steps: list[int]) -> None:
    """Remaining records fall by at least one a second (or end): never stalled at 2 s."""
    watch = RecoveryWatch(stall_s=2.0)
    remaining = sum(steps) + len(steps)
    for t, step in enumerate(steps):
        watch.sample(remaining, now=float(t))
        assert watch.stalled(float(t) + 1.0) is None
        remaining -= step + 1


def test_the_changelogs_are_sought_again_once_per_wait() -> None:
    watch = RecoveryWatch(stall_s=60.0)
    watch.sample(7, now=100.0)
    assert not watch.seek_again(104.0, after_s=5.0)
    assert watch.seek_again(105.0, after_s=5.0)
    assert not watch.seek_again(106.0, after_s=5.0), "once per wait"
    watch.sample(6, now=107.0)  # it read one: a new wait
    assert watch.seek_again(112.0, after_s=5.0)
