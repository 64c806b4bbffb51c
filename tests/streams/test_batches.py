"""How the worker's agents take their records (`streams.batches`): in batches of what is
waiting.

Real faust-streaming (a stream over an in-memory channel; no broker needed). No test
here waits on the wall clock: a batch that waited for more to come would hang the test
(each `next` is bounded by `asyncio.wait_for` only to fail instead of hanging).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import faust
from faust.streams import current_event
from faust.types import EventT

from remediator.streams.batches import waiting, written_under

CAP = 3


async def setup() -> tuple[faust.ChannelT[int], AsyncIterator[Sequence[EventT[int]]]]:
    app = faust.App("batches", broker="kafka://127.0.0.1:1", autodiscover=False)
    app.flow_control.resume()  # what a started app does; no broker is reached
    channel: faust.ChannelT[int] = app.channel(maxsize=100)
    return channel, waiting(app.stream(channel), CAP)  # type: ignore[arg-type]


async def next_batch(batches: AsyncIterator[Sequence[EventT[int]]]) -> list[int]:
    return [e.value for e in await asyncio.wait_for(batches.__anext__(), timeout=10)]


async def test_waiting_records_go_together_up_to_the_cap_and_a_lone_one_at_once() -> None:
    channel, batches = await setup()
    for value in range(5):
        await channel.send(value=value)
    assert await next_batch(batches) == [0, 1, 2]  # the cap
    assert await next_batch(batches) == [3, 4]  # what was left: no wait for a third
    await channel.send(value=5)
    assert await next_batch(batches) == [5]


async def test_a_batch_is_acked_only_once_the_next_is_asked_for() -> None:
    channel, batches = await setup()
    for value in range(2):
        await channel.send(value=value)
    first = await asyncio.wait_for(batches.__anext__(), timeout=10)
    assert not any(e.message.acked for e in first), "acked before it was handled"
    await channel.send(value=2)
    await asyncio.wait_for(batches.__anext__(), timeout=10)
    assert all(e.message.acked for e in first)


async def test_a_table_write_has_its_event_only_while_it_writes() -> None:
    channel, batches = await setup()
    await channel.send(value=0)
    (event,) = await asyncio.wait_for(batches.__anext__(), timeout=10)
    before = current_event()
    with written_under(event):  # as write_rows and the guard write their rows
        assert current_event() is event  # the row's changelog partition is the event's
    assert current_event() is before
