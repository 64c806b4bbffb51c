"""How every agent of the worker takes its topic: in batches of what is waiting.

An agent blocks for one record, then takes every record already in its buffer with it
(up to a cap): under load batches grow by themselves. A first record that came alone
waits a little for those right behind it (`linger_s`, the partitions and guard agents:
`StreamsConfig.batch_linger_s`, 5 ms), once per batch. Without it, records coming one by
one, as a cluster sends them, made a batch each, and each batch costs the same whatever
it holds: a table row per partition, a record to the guard, the guard's feedback to each
partition it tells (docs/kafka.md, "Batches"). Faust's `take_events` instead waited up to
its `within` (50 ms here) for a full batch on every hop, and a guardrail's "not yet" takes
three.

Acks are manual (Faust's `noack` stream): a batch's events are acked once the agent has
handled the batch and asks for the next, so a crash mid-batch leaves them uncommitted.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from faust.streams import Stream, _current_event  # see written_under
from faust.types import TP, ChannelT, EventT, StreamT

from remediator.streams.progress import Progress


async def waiting(
    stream: StreamT[bytes],
    most: int,
    progress: Progress[TP] | None = None,
    linger_s: float = 0.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[Sequence[EventT[bytes]]]:
    """The stream's events in batches of what is waiting, at most `most` each; a batch
    whose first event came alone waits `linger_s` for more, once. Each partition's last
    offset delivered goes to `progress`."""
    manual = cast(Stream[bytes], stream).noack()
    buffered = cast(ChannelT[bytes], manual.channel).queue
    batch: list[EventT[bytes]] = []
    async for event in manual.events():
        if progress is not None:
            progress.saw(event.message.tp, event.message.offset)
        batch.append(event)
        if len(batch) < most and buffered.empty():
            # The fetcher may be putting the rest of its fetch; a lone first record waits
            # for the records right behind it (the linger), once per batch.
            await sleep(linger_s if len(batch) == 1 else 0)
        if len(batch) >= most or buffered.empty():
            yield batch
            for done in batch:
                await manual.ack(done)
            batch = []


@contextmanager
def written_under(event: EventT[bytes]) -> Iterator[None]:
    """Table writes outside the stream's own iteration (after a batch) need Faust's
    current event: its partition is the changelog partition the row goes to.

    Only this task's context variable is set (Faust's own, which its tables read), never
    the stream's `current_event` attribute, which Faust's other tasks read."""
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)
