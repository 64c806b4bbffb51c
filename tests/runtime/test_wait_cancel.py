"""`clock.wait` ends when its task is cancelled, whenever the cancel lands.

Found on one core (issue 17): the runtime's executor loop was cancelled while `wait` was
awaiting its own cancelled helpers in `finally`; the `suppress(CancelledError)` there swallowed
the executor's cancel too, the loop went on, and `Service.stop()` waited forever."""

from __future__ import annotations

import asyncio

import pytest

from remediator.runtime.clock import SystemClock, wait


@pytest.mark.parametrize("turns", range(8))
async def test_a_cancel_at_any_turn_after_the_event_ends_the_wait(turns: int) -> None:
    event = asyncio.Event()
    task = asyncio.create_task(wait(event, 60.0, SystemClock()))
    for _ in range(3):
        await asyncio.sleep(0)  # the task is in asyncio.wait now
    event.set()
    for _ in range(turns):  # the cancel lands while `wait` ends: in and after its finally
        await asyncio.sleep(0)
    task.cancel()
    (outcome,) = await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        return
    assert outcome is True and not task.cancelling(), "the cancel was swallowed"
