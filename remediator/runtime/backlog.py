"""Inputs waiting for the core: bounded, with back-pressure on whoever sends them.

Depth is counted in inputs. Webhooks reserve room before they are stored and are told no
when there is none (503: the sender retries); watch threads wait for room (the watch stops
reading, the API server holds the rest); the loop's own observers (first-token probe) are
limited by the pods they look at and always get in. One batch larger than the limit gets in
when the backlog is empty, or it never could.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from remediator.inputs.records import Input


class Backlog:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._queue: asyncio.Queue[tuple[list[Input], bool]] = asyncio.Queue()
        self._room = threading.Condition()
        self._depth = 0  # reserved or queued, not yet taken

    @property
    def depth(self) -> int:
        return self._depth

    def reserve(self, n: int) -> bool:
        """Room for `n` inputs, or False (full); `put` or `release` it afterwards."""
        with self._room:
            if self._depth and self._depth + n > self.limit:
                return False
            self._depth += n
            return True

    def release(self, n: int) -> None:
        with self._room:
            self._depth -= n
            self._room.notify_all()

    def put(self, inputs: list[Input], watched: bool, reserved: bool = True) -> None:
        """On the loop's thread. `watched`: from the watch or the loop's own observers (False
        for webhooks: Tracker.apply bounds their pods); `reserved=False` for what never waits
        (observers, restored inbox rows)."""
        if not reserved:
            with self._room:
                self._depth += len(inputs)
        self._queue.put_nowait((inputs, watched))

    def put_threadsafe(
        self, loop: asyncio.AbstractEventLoop, inputs: list[Input], stopped: Callable[[], bool]
    ) -> bool:
        """From a watch thread: wait for room, then queue; False if stopped meanwhile."""
        n = len(inputs)
        with self._room:
            while self._depth and self._depth + n > self.limit:
                if stopped():
                    return False
                self._room.wait(0.5)
            self._depth += n
        try:
            loop.call_soon_threadsafe(self._queue.put_nowait, (inputs, True))
        except RuntimeError:  # the loop is closed: shutting down
            return False
        return True

    async def get(self) -> tuple[list[Input], bool]:
        """The next batch and whether it was watched; its room is freed at once (the
        session is about to take it)."""
        inputs, watched = await self._queue.get()
        self.release(len(inputs))
        return inputs, watched
