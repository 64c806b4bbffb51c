"""Time for the runtime, injected: the system's, or a virtual one that tests move by hand.

The core never reads a clock (it is given `now`); the runtime's loops, the outbox and
the Lease read this one, so a test can run them on virtual time: no sleeps, no racy
waits. `now()` is wall time (seconds since the epoch), what decisions and outbox rows
are stamped with; `monotonic()` measures elapsed time and never steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...
    def monotonic(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class VirtualClock:
    """Moves only when told (`advance`); sleepers wake in order of their deadlines."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = start
        self._start = start
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._t

    def monotonic(self) -> float:
        return self._t - self._start

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._t + max(seconds, 0.0), next(self._seq), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time on, waking each sleeper at its deadline and letting it run."""
        until = self._t + seconds
        while self._sleepers and self._sleepers[0][0] <= until:
            at, _, future = heapq.heappop(self._sleepers)
            self._t = max(self._t, at)
            if not future.done():
                future.set_result(None)
            await settle()
        self._t = until
        await settle()


async def settle(rounds: int = 20) -> None:
    """Let every ready task run until none is (bounded): what `advance` waits for."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def wait(event: asyncio.Event, timeout: float, clock: Clock) -> bool:
    """True when `event` is set within `timeout` seconds of `clock`, False otherwise."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiter, sleeper):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return event.is_set()
