"""The worker's table writes between batches leave Faust's batching alone.

Real faust-streaming (`Stream.take_events` over an in-memory channel; no broker needed).
`take_events` fills the next batch from another task, which reads the stream's current
event after waiting for the batch being handled. A table write during that batch once set
that attribute (and cleared it): the waiting event was then in no batch, never handled and
never acked, so its offset was never committed (a takeover left lag on partitions for
good). The interleaving is forced with the event loop's own turns, not wall-clock sleeps.
"""

from __future__ import annotations

import asyncio

import faust
from faust.streams import current_event

from remediator.streams.app import _event

BATCHES = 3


async def turns(n: int = 20) -> None:
    """Let every other task run until it waits (the drainer takes what was sent)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def test_a_table_write_inside_a_batch_loses_no_event_of_the_next() -> None:
    app = faust.App("take-batches", broker="kafka://127.0.0.1:1", autodiscover=False)
    app.flow_control.resume()  # what a started app does; no broker is reached
    channel = app.channel(maxsize=100)
    stream = app.stream(channel)
    batches: list[list[int]] = []
    written: list[bool] = []

    async def agent() -> None:
        # Never full: each batch goes when `within` lapses, and the drainer is then free
        # to take the next event and wait with it for this batch to be handled.
        async for batch in stream.take_events(100, within=0.01):
            assert batch, "an event was taken into no batch: never handled, never acked"
            batches.append([e.value for e in batch])
            if len(batches) == BATCHES:
                break
            await channel.send(value=len(batches))  # arrives while this batch is handled
            await turns()
            with _event(batch[-1]):  # as write_rows and the guard write their rows
                written.append(current_event() is batch[-1])

    await channel.send(value=0)
    await asyncio.wait_for(agent(), timeout=30)
    assert batches == [[0], [1], [2]]
    assert written == [True] * (BATCHES - 1), "each row went to its batch's partition"
    assert current_event() is None, "the write's event is this task's only while it writes"
