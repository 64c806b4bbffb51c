"""DueQueue gives what a heap of (due, sequence, thing) tuples gave: by time, then in the order
things came, whatever the pushes, pops and drops in between. The policy's timers and the fleet
simulator's events rest on it (a different order would move every simulated figure)."""

from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.policy.due import DueQueue

# Few distinct times, so that many things share one; and any float a clock could give.
TIMES = st.one_of(st.sampled_from([0.0, 1.0, 1.5, 2.0, 1e9]), st.floats(-1e12, 1e12))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("push"), TIMES),
        st.tuples(st.just("pop"), st.just(0.0)),
        st.tuples(st.just("drop odd"), st.just(0.0)),
    ),
    max_size=200,
)


@given(OPS)
def test_the_order_is_the_tuple_heaps(ops: list[tuple[str, float]]) -> None:
    queue: DueQueue[int] = DueQueue()
    reference: list[tuple[float, int]] = []
    for seq, (op, due) in enumerate(ops):
        if op == "push":
            queue.push(due, seq)
            heapq.heappush(reference, (due, seq))
        elif op == "pop" and reference:
            assert queue.first() == reference[0][0]
            assert queue.pop() == heapq.heappop(reference)
        elif op == "drop odd":
            queue.keep(lambda s: s % 2 == 0)
            reference = [x for x in reference if x[1] % 2 == 0]
            heapq.heapify(reference)
        assert len(queue) == len(reference)
        assert sorted(queue.items()) == sorted(reference)
    while reference:
        assert queue.pop() == heapq.heappop(reference)
    assert queue.first() is None and len(queue) == 0


def test_an_empty_queue_has_nothing_to_pop() -> None:
    with pytest.raises(IndexError):
        DueQueue[str]().pop()
