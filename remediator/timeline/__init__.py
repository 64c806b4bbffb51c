"""Cold-start timelines: the library API.

from remediator.timeline import timelines_from
tracker = timelines_from(open("events.jsonl", "rb"))
for t in tracker:
    print(t.name, t.state(), t.phases(), t.total())
"""

from __future__ import annotations

from collections.abc import Iterable

from remediator.inputs.decode import decode
from remediator.timeline.model import PHASES, STATES, UNFINISHED, PodTimeline
from remediator.timeline.tracker import StateChange, Tracker

__all__ = [
    "PHASES",
    "STATES",
    "UNFINISHED",
    "PodTimeline",
    "StateChange",
    "Tracker",
    "timelines_from",
]


def timelines_from(lines: Iterable[bytes | str], tracker: Tracker | None = None) -> Tracker:
    """Apply JSON lines (any input kind) in order, on a clock that follows their own
    timestamps. Bad lines raise InputError; use `remediator replay` to skip and report them."""
    tracker = tracker if tracker is not None else Tracker()
    now = 0.0
    for line in lines:
        if not line.strip():
            continue
        for item in decode(line):
            if item.at is not None and item.at > now:
                now = item.at
            tracker.apply(item, now)
    return tracker
