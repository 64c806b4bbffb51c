"""A worker that delivered nothing for `quiet_s` while a partition it holds has records
past what it delivered is stuck on that partition (remediator.streams.progress)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remediator.streams.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_records_past_the_last_delivered_are_stuck_once_quiet() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.saw("inputs-0", 3)
    clock.now = 4.9
    assert progress.stuck({"inputs-0": 6, "inputs-1": 2}) == {}, "not quiet yet"
    clock.now = 5.0
    # inputs-0 delivered up to 3 of 0..5; inputs-1 never delivered its 0..1: suspected at
    # this look, stuck at the next one with nothing delivered in between.
    assert progress.stuck({"inputs-0": 6, "inputs-1": 2}) == {}
    clock.now = 6.0
    assert progress.stuck({"inputs-0": 6, "inputs-1": 2}) == {"inputs-0": 4, "inputs-1": 0}


def test_a_record_delivered_between_two_looks_clears_the_suspicion() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.saw("inputs-0", 3)
    clock.now = 5.0
    assert progress.stuck({"inputs-0": 6}) == {}  # suspected
    progress.saw("inputs-0", 4)  # the look awaited; meanwhile one came
    clock.now = 10.0
    assert progress.stuck({"inputs-0": 6}) == {}, "suspected anew, from 5"
    clock.now = 11.0
    assert progress.stuck({"inputs-0": 6}) == {"inputs-0": 5}


def test_a_partition_delivered_to_its_end_or_not_known_is_not_stuck() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.saw("inputs-0", 5)
    clock.now = 60.0
    assert progress.stuck({"inputs-0": 6, "inputs-1": 0, "inputs-2": None}) == {}


def test_quiet_counts_from_the_first_look_and_again_after_a_rewind() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    clock.now = 100.0
    assert not progress.quiet()  # the first look: quiet counted from now
    clock.now = 105.0
    assert progress.quiet()
    progress.rewound()
    assert not progress.quiet()
    clock.now = 110.0
    assert progress.quiet()


def test_a_revoked_partition_is_forgotten() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=0.0)
    progress.saw("inputs-0", 9)
    progress.forget(["inputs-0"])
    assert progress.stuck({"inputs-0": 10}) == {}
    assert progress.stuck({"inputs-0": 10}) == {"inputs-0": 0}


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=40))
def test_delivering_every_record_leaves_nothing_stuck(seen: list[tuple[int, int]]) -> None:
    """In any order (a redelivery goes back), a partition whose every record up to its
    end was delivered is never stuck."""
    clock = Clock()
    progress: Progress[int] = Progress(clock, quiet_s=0.0)
    ends: dict[int, int] = {}
    for tp, offset in seen:
        progress.saw(tp, offset)
        ends[tp] = max(ends.get(tp, 0), offset + 1)
    assert progress.stuck(ends) == {}
