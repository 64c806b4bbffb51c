"""A partition that delivered nothing for `quiet_s` while it has records past what it
delivered, found so at two looks in a row, is stuck (remediator.streams.progress)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remediator.streams.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_records_past_the_last_delivered_are_stuck_once_quiet_at_two_looks() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.saw("inputs-0", 3)
    ends = {"inputs-0": 6, "inputs-1": 2}
    assert progress.unknown(ends) == ["inputs-1"]
    progress.learn({"inputs-1": 0})  # the group committed none of it
    clock.now = 1.0
    assert progress.stuck(ends) == {}, "quiet is counted from the first look"
    clock.now = 5.9
    assert progress.stuck(ends) == {}, "not quiet yet"
    clock.now = 6.0
    # inputs-0 delivered up to 3 of 0..5, inputs-1 none of its 0..1: suspected at this
    # look, stuck at the next one with nothing delivered in between.
    assert progress.stuck(ends) == {}
    clock.now = 7.0
    assert progress.stuck(ends) == {"inputs-0": 4, "inputs-1": 0}


def test_a_partition_that_delivers_is_never_stuck_whatever_the_others_do() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    for t in range(30):
        clock.now = float(t)
        progress.saw("inputs-0", t)  # one record a second, always one behind the end
        assert "inputs-0" not in progress.stuck({"inputs-0": t + 2, "inputs-1": 5})


def test_a_record_delivered_between_two_looks_clears_the_suspicion() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.stuck({})  # the first look
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
    ends = {"inputs-0": 6, "inputs-1": 0, "inputs-2": None}
    assert progress.stuck(ends) == {}
    assert progress.stuck(ends) == {}


def test_quiet_counts_again_after_a_seek_back() -> None:
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=5.0)
    progress.learn({"inputs-0": 0})
    progress.stuck({})
    clock.now = 5.0
    progress.stuck({"inputs-0": 1})
    progress.rewound()
    clock.now = 6.0
    assert progress.stuck({"inputs-0": 1}) == {}
    clock.now = 10.0
    assert progress.stuck({"inputs-0": 1}) == {}  # suspected again
    assert progress.stuck({"inputs-0": 1}) == {"inputs-0": 0}


def test_a_partition_taken_over_is_judged_from_what_the_group_committed() -> None:
    """Delivered nothing here: what came before was delivered by its previous owner, up
    to the committed offset; until that is known, it is not judged."""
    clock = Clock()
    progress: Progress[str] = Progress(clock, quiet_s=0.0)
    progress.saw("inputs-0", 9)
    progress.forget(["inputs-0"])  # revoked, then given back
    ends = {"inputs-0": 10, "inputs-1": 3, "inputs-2": 0}
    assert progress.unknown(ends) == ["inputs-0", "inputs-1"], "no records: nothing to ask"
    assert progress.stuck(ends) == {}
    assert progress.stuck(ends) == {}, "not known: not judged"
    progress.learn({"inputs-0": 10, "inputs-1": 1})
    assert progress.unknown(ends) == []
    assert progress.stuck(ends) == {}
    assert progress.stuck(ends) == {"inputs-1": 1}, "inputs-0 was delivered to its end"


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
    assert progress.stuck(ends) == {}
