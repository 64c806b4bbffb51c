"""Time for the runtime, injected: the system's, or a virtual one that tests move by hand.

The core never reads a clock (it is given `now`); the runtime's loops, the outbox and
the Lease read this one, so a test can run them on virtual time: no sleeps, no racy
waits. `now()` is wall time (seconds since the epoch), what outbox rows and the Lease
are stamped with; `monotonic()` measures elapsed time and never steps. Decisions and
budgets are on `ClusterTime`: the cluster's clock as its inputs show it.
"""

from __future__ import annotations

import asyncio
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


class ClusterTime:
    """The time budgets are measured on: the API server's, as its stamps show it, carried
    on by the local monotonic clock between them.

    A stuck-pod budget runs from a time the cluster stamped (a container's start, a
    transition), moved onto the API server's clock where the node's clock is proven off
    (timeline `clock_skew`); measuring it with the local wall clock mixed two clocks, so a
    step of the local clock (NTP, a VM resumed) fired every timer at once or none for an
    hour. Here `now()` is the newest API-server time observed plus the monotonic time
    elapsed since it was observed, so a step of the local wall clock changes nothing.
    Before anything is observed it is the local wall time (nothing the cluster stamped is
    tracked yet). An observation older than the estimate (a relist, a late event) changes
    nothing; a newer one moves it on. Only the API server's own stamps are observed
    (`inputs.stamps`, from the watch): a kubelet's clock is its node's, and one node an
    hour ahead must not age every other node's pods by an hour. An API-server stamp is
    made before it is seen, so `now()` never runs ahead of the API server: a budget may
    lapse late by a delivery's latency, never early.
    """

    def __init__(self, local: Clock) -> None:
        self._local = local
        self._seen: float | None = None  # the newest cluster time observed
        self._seen_mono = 0.0  # the local monotonic clock when it was observed

    @property
    def known(self) -> bool:
        """Whether a cluster time has been observed (else `now()` is local wall time)."""
        return self._seen is not None

    def observe(self, at: float | None) -> None:
        if at is None:
            return
        if self._seen is None or at > self.now():
            self._seen, self._seen_mono = at, self._local.monotonic()

    def now(self) -> float:
        if self._seen is None:
            return self._local.now()
        return self._seen + (self._local.monotonic() - self._seen_mono)

    def monotonic(self) -> float:
        return self._local.monotonic()

    async def sleep(self, seconds: float) -> None:
        await self._local.sleep(seconds)


class VirtualClock:
    """Moves only when told (`advance`); sleepers wake in order of their deadlines.
    `step_wall` steps the wall clock alone, as NTP or a resumed VM does: the monotonic
    clock (and every sleeper) goes on as before."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = start
        self._start = start
        self._wall_offset = 0.0
        self._seq = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def now(self) -> float:
        return self._t + self._wall_offset

    def step_wall(self, seconds: float) -> None:
        self._wall_offset += seconds

    def monotonic(self) -> float:
        return self._t - self._start

    def pause(self, seconds: float) -> None:
        """The process is stopped for `seconds` (SIGSTOP, a frozen VM): both clocks move on
        while nothing runs; every sleeper due meanwhile wakes late, at the next `advance`."""
        self._t += seconds

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
        # Their own cancellations are results here; a cancel of the caller still raises
        # (a `suppress(CancelledError)` around each await swallowed that one too).
        await asyncio.gather(waiter, sleeper, return_exceptions=True)
    return event.is_set()
