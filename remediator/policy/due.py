"""Things due at times: the soonest first, those due at one time in the order they came.

The policy's timers and the fleet simulator's events are kept here. One heap of
(due, sequence, ...) tuples did the same, but compared tuples item by item on every step of
its sifts (two float compares and the tuple machinery each); here the heap holds each due
time once, as a float, and each time's things are a list in arrival order. The order is the
tuple heap's to the letter: by time, then first in first out.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class DueQueue(Generic[T]):
    def __init__(self) -> None:
        self._times: list[float] = []  # a heap of the due times, each once
        self._at: dict[float, list[T]] = {}  # due time -> its things, first come first
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def push(self, due: float, item: T) -> None:
        things = self._at.get(due)
        if things is None:
            self._at[due] = [item]
            heapq.heappush(self._times, due)
        else:
            things.append(item)
        self._count += 1

    def first(self) -> float | None:
        """When the soonest thing is due; None when nothing is."""
        return self._times[0] if self._times else None

    def pop(self) -> tuple[float, T]:
        """The soonest thing, taken off, with its due time (raises IndexError when empty)."""
        due = self._times[0]
        things = self._at[due]
        item = things.pop(0)
        if not things:
            del self._at[due]
            heapq.heappop(self._times)
        self._count -= 1
        return due, item

    def items(self) -> Iterator[tuple[float, T]]:
        """Everything held with its due time, in no particular order."""
        for due, things in self._at.items():
            for item in things:
                yield due, item

    def keep(self, wanted: Callable[[T], bool]) -> None:
        """Drop what `wanted` refuses (the order of the rest stands)."""
        at: dict[float, list[T]] = {}
        for due, things in self._at.items():
            kept = [item for item in things if wanted(item)]
            if kept:
                at[due] = kept
        self._at = at
        self._times = list(at)
        heapq.heapify(self._times)
        self._count = sum(len(things) for things in at.values())
