"""The supervisor on a virtual clock: a failed task comes back after a doubling pause, one
that keeps failing stops the runtime, and a loop that merely ends counts as a failure."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter

from remediator.runtime.clock import VirtualClock, settle
from remediator.runtime.supervisor import Restarts, Supervisor


def supervisor(clock: VirtualClock, most: int = 5) -> tuple[Supervisor, Counter]:
    counter = Counter("restarts", "", ["task"], registry=CollectorRegistry())
    return Supervisor(clock, Restarts(after_s=1.0, most=most, window_s=300.0), counter,
                      asyncio.Event()), counter  # fmt: skip


async def test_a_failed_task_is_restarted_after_a_doubling_pause() -> None:
    clock = VirtualClock()
    sup, counter = supervisor(clock)
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(clock.monotonic())
        if len(starts) <= 2:
            raise OSError("disk gone")
        await asyncio.Event().wait()  # the third run stays up

    task = asyncio.create_task(sup.run("consume", flaky))
    await settle()
    assert sup.status() == "task consume failed: OSError: disk gone"
    await clock.advance(10)
    assert [round(s - starts[0], 3) for s in starts] == [0.0, 1.0, 3.0]  # 1 s, then 2 s
    assert counter.labels("consume")._value.get() == 2
    assert sup.status() is None and not sup.stopping.is_set()
    task.cancel()


async def test_a_task_that_keeps_failing_stops_the_runtime() -> None:
    clock = VirtualClock()
    sup, _ = supervisor(clock, most=3)

    async def broken() -> None:
        raise ValueError("bad row")

    task = asyncio.create_task(sup.run("executor", broken))
    await settle()
    await clock.advance(60)
    assert task.done() and sup.stopping.is_set()
    assert sup.failure == "task executor failed 3 times; last: ValueError: bad row"


async def test_a_loop_that_ends_is_a_failure_unless_the_runtime_is_stopping() -> None:
    clock = VirtualClock()
    sup, counter = supervisor(clock)

    async def ends() -> None:
        return None

    task = asyncio.create_task(sup.run("timer", ends))
    await settle()
    assert sup.status() == "task timer failed: RuntimeError: task timer ended"
    sup.stopping.set()  # now an end is the finish it was told to make
    await clock.advance(5)
    assert task.done() and sup.failure is None and counter.labels("timer")._value.get() == 1
