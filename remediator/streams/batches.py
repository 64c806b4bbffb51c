"""How every agent of the worker takes its topic: in batches of what is waiting.

An agent blocks for one record, then takes every record already in its buffer with it
(up to a cap): a lone record goes on at once, and under load batches grow by themselves.
Faust's `take_events` waited up to its `within` for a batch on every hop of a record
(inputs, candidates, feedback), and a guardrail's "not yet" takes three hops.

Acks are manual (Faust's `noack` stream): a batch's events are acked once the agent has
handled the batch and asks for the next, so a crash mid-batch leaves them uncommitted.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import cast

from faust.streams import Stream, _current_event  # see written_under
from faust.types import TP, ChannelT, EventT, StreamT

from remediator.streams.progress import Progress


async def waiting(
    stream: StreamT[bytes], most: int, progress: Progress[TP] | None = None
) -> AsyncIterator[Sequence[EventT[bytes]]]:
    """The stream's events in batches of what is waiting, at most `most` each; each
    partition's last offset delivered goes to `progress`."""
    manual = cast(Stream[bytes], stream).noack()
    buffered = cast(ChannelT[bytes], manual.channel).queue
    batch: list[EventT[bytes]] = []
    async for event in manual.events():
        if progress is not None:
            progress.saw(event.message.tp, event.message.offset)
        batch.append(event)
        if len(batch) < most and buffered.empty():
            await asyncio.sleep(0)  # the fetcher may be putting the rest of its fetch
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
