"""The backlog between the sources and the core is bounded: webhooks are told no at the
limit (they answer 503), watch threads wait for room (the watch stops reading)."""

from __future__ import annotations

import asyncio
import threading

from remediator.inputs.records import FirstToken, Input
from remediator.runtime.backlog import Backlog


def inputs(n: int) -> list[Input]:
    return [FirstToken("llm", f"p{i}", None, 1.0) for i in range(n)]


async def test_webhooks_are_refused_at_the_limit_and_let_in_once_taken() -> None:
    backlog = Backlog(limit=3)
    assert backlog.reserve(2)
    backlog.put(inputs(2), watched=False)
    assert not backlog.reserve(2)  # 4 > 3: no room
    assert backlog.reserve(1)
    backlog.release(1)  # a write that failed gives its room back
    taken = await backlog.get()
    assert len(taken[0]) == 2 and not taken[1] and backlog.depth == 0
    assert backlog.reserve(5)  # larger than the limit, but nothing waits: it gets in


async def test_a_watch_thread_waits_for_room_and_goes_on_when_the_core_takes() -> None:
    backlog = Backlog(limit=2)
    loop = asyncio.get_running_loop()
    stopped = threading.Event()
    assert backlog.put_threadsafe(loop, inputs(2), stopped.is_set)
    done = threading.Event()

    def watch() -> None:
        backlog.put_threadsafe(loop, inputs(1), stopped.is_set)
        done.set()

    thread = threading.Thread(target=watch)
    thread.start()
    await asyncio.sleep(0.2)
    assert not done.is_set()  # held: the backlog is full
    await backlog.get()
    await asyncio.to_thread(done.wait, 10)
    assert done.is_set()
    assert len((await backlog.get())[0]) == 1
    thread.join(5)


async def test_a_waiting_watch_thread_gives_up_when_stopped() -> None:
    backlog = Backlog(limit=1)
    loop = asyncio.get_running_loop()
    stopped = threading.Event()
    backlog.put(inputs(1), watched=True, reserved=False)
    result: list[bool] = []
    thread = threading.Thread(
        target=lambda: result.append(backlog.put_threadsafe(loop, inputs(1), stopped.is_set))
    )
    thread.start()
    stopped.set()
    await asyncio.to_thread(thread.join, 10)
    assert result == [False]
