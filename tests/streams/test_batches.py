"""How the worker's agents take their records (`streams.batches`): in batches of what is
waiting, a lone first record lingering for those right behind it.

Real faust-streaming (a stream over an in-memory channel; no broker needed). No test
here waits on the wall clock: a batch that waited for more to come would hang the test
(each `next` is bounded by `asyncio.wait_for` only to fail instead of hanging), and the
linger's sleep is the test's own, released when the test has sent what it means to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import faust
import pytest
from faust.streams import current_event
from faust.types import EventT

from remediator.streams.batches import waiting, written_under
from remediator.streams.config import StreamsConfig

CAP = 3


async def setup(
    linger_s: float = 0.0, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> tuple[faust.ChannelT[int], AsyncIterator[Sequence[EventT[int]]]]:
    app = faust.App("batches", broker="kafka://127.0.0.1:1", autodiscover=False)
    app.flow_control.resume()  # what a started app does; no broker is reached
    channel: faust.ChannelT[int] = app.channel(maxsize=100)
    stream = app.stream(channel)
    return channel, waiting(stream, CAP, linger_s=linger_s, sleep=sleep)  # type: ignore[arg-type]


class Linger:
    """The batches' sleep: a linger (any wait above 0) is said and held until released."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.lingering, self.released = asyncio.Event(), asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)
        if seconds > 0:
            self.lingering.set()
            await self.released.wait()


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


async def test_a_lone_first_record_lingers_for_those_right_behind_it() -> None:
    linger = Linger()
    channel, batches = await setup(linger_s=0.005, sleep=linger)
    await channel.send(value=0)
    taking = asyncio.ensure_future(next_batch(batches))
    await asyncio.wait_for(linger.lingering.wait(), timeout=10)
    for value in (1, 2, 3):  # came during the linger
        await channel.send(value=value)
    linger.released.set()
    assert await taking == [0, 1, 2]  # the cap still holds
    assert await next_batch(batches) == [3]  # its own linger: released already
    assert [s for s in linger.asked if s > 0] == [0.005, 0.005]


async def test_a_first_record_with_others_behind_it_does_not_linger() -> None:
    linger = Linger()
    channel, batches = await setup(linger_s=0.005, sleep=linger)
    for value in range(2):
        await channel.send(value=value)
    assert await next_batch(batches) == [0, 1]
    assert [s for s in linger.asked if s > 0] == []


@pytest.mark.parametrize("linger", [-0.001, 1.5])
def test_a_linger_out_of_range_is_refused(linger: float) -> None:
    with pytest.raises(ValueError, match="batch_linger_s"):
        StreamsConfig(batch_linger_s=linger)
