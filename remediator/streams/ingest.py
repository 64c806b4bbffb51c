"""The ingest: webhooks and watch events onto the input topic, 2xx only once acked.

`Publisher` cuts each body by pod key (`streams.keys.split`) and packs the documents
bound for one input partition into one Kafka record, an `Envelope`
(`contract.records`, written by `contract.codec`): the broker's and the worker's cost
is per record, so many inputs share one. An envelope goes out when it holds
`envelope_bytes`, or `linger_s` after its first document came (on the ingest's
injected clock), or on `flush`; acks=all on an idempotent producer, in order per
partition. The HTTP answer waits for the envelopes its body went into, so a 202 means
the broker has the input and a 5xx means the sender must retry (a retried body is
harmless: the core's decisions are idempotent by incident). The HTTP edge is serve's
own (`KafkaIntake` behind `sources.http.make_app`): the same auth, the same 400s for
bad input, the same probes and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter

from remediator.contract.records import Packed
from remediator.inputs.records import Input
from remediator.runtime.clock import Clock, ClusterTime, SystemClock
from remediator.sources.http import TokenSource, make_app
from remediator.sources.metrics import SourceMetrics
from remediator.streams.config import StreamsConfig
from remediator.streams.core import envelope, tick_record
from remediator.streams.keys import BROADCAST, Record, arrived, partition_of, split
from remediator.streams.pods import TICK

# An envelope goes out at this size (its documents' bytes): well under Kafka's default
# message size (1 MB) and under a `pods` table row (streams.pods.ROW_BYTES), which
# holds an envelope whole.
ENVELOPE_BYTES = 128 * 1024
# ... or this long after its first document came: what an input may wait for others.
LINGER_S = 0.005
ENVELOPE_KEY = b"\x00inputs"  # the record's key (its partition is chosen by the ingest)
_PACKED = 24  # bytes an envelope adds per document (key and time aside)


@dataclass
class _Open:
    """An envelope being filled for one partition, and its ack (set once the broker
    acked the record it went out in)."""

    acked: asyncio.Future[None]
    records: list[Packed] = field(default_factory=list)
    size: int = 0
    inputs: int = 0  # its documents but the ticks


class Publisher:
    def __init__(
        self,
        cfg: StreamsConfig,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
        linger_s: float = LINGER_S,
        envelope_bytes: int = ENVELOPE_BYTES,
    ) -> None:
        self.cfg = cfg
        self.clock = clock if clock is not None else SystemClock()
        # Every document carries the cluster's time it arrived at (`keys.arrived`).
        self.cluster = ClusterTime(self.clock)
        self.linger_s = linger_s
        self.envelope_bytes = envelope_bytes
        self._producer = AIOKafkaProducer(
            bootstrap_servers=cfg.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=0,  # an envelope has lingered already
            max_request_size=max(1024 * 1024, 2 * envelope_bytes),
            client_id=f"{cfg.group}-ingest",
        )
        registry = registry if registry is not None else CollectorRegistry()
        self.records = Counter(
            "remediator_ingest_records_total",
            "Input documents acked by the broker (one per partition it went to; ticks aside).",
            registry=registry,
        )
        self.envelopes = Counter(
            "remediator_ingest_envelopes_total",
            "Input-topic records sent, each an envelope of documents for one partition.",
            registry=registry,
        )
        self.started = False
        self._open: dict[int, _Open] = {}
        self._ready: list[tuple[int, _Open]] = []  # full or lingered: to send, in order
        self._sending = asyncio.Lock()  # one sender at a time: order per partition
        self._linger: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._producer.start()
        self.started = True

    async def stop(self) -> None:
        """What is open goes out first."""
        if self._linger is not None:
            self._linger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._linger
        with contextlib.suppress(KafkaError):
            await self.flush()
        await self._producer.stop()

    async def publish(self, body: bytes) -> int:
        """Send `body`'s documents; returns how many, once the broker acked every one."""
        records, acks = await self.enqueue(body)
        await asyncio.gather(*acks)
        return records

    async def enqueue(self, body: bytes) -> tuple[int, list[asyncio.Future[None]]]:
        """Pack `body`'s documents into their partitions' envelopes, in order; the acks
        (one per envelope it went into) come once those went out and the broker has
        them. A caller with many bodies in flight (a bench, a relist) keeps their order."""
        return await self.enqueue_records(split(body))

    async def enqueue_records(
        self, records: list[Record]
    ) -> tuple[int, list[asyncio.Future[None]]]:
        """`enqueue` of a body already cut by key (`keys.split`)."""
        now = arrived(records, self.cluster)
        acks: dict[int, asyncio.Future[None]] = {}
        for r in records:
            targets = range(self.cfg.inputs.partitions) if r.key == BROADCAST else [None]
            for p in targets:
                ack = self._add(r.key, r.value, now, p)
                acks[id(ack)] = ack
        await self._go()
        return len(records), list(acks.values())

    async def tick(self, at: float) -> None:
        """Move every partition's clock to `at` (the cluster's time)."""
        await asyncio.gather(*await self.enqueue_tick(at))

    async def enqueue_tick(self, at: float) -> list[asyncio.Future[None]]:
        """A tick to every partition, in order after what was enqueued; its acks come later."""
        return await self.enqueue_internal(TICK, [tick_record(at)] * self.cfg.inputs.partitions)

    async def enqueue_internal(self, key: str, values: list[bytes]) -> list[asyncio.Future[None]]:
        """An internal record to each partition (`values[p]`), in order after what was
        enqueued: a tick, the watch's word, a complete list. Its acks come later."""
        acks = [self._add(key, value, None, p) for p, value in enumerate(values)]
        await self._go()
        return acks

    async def flush(self) -> None:
        """Send every open envelope now (a caller that has enqueued all it had)."""
        self._ready.extend(self._open.items())
        self._open.clear()
        await self._drain()

    # ---- envelopes ----------------------------------------------------------------------
    def _add(self, key: str, value: bytes, at: float | None, p: int | None) -> asyncio.Future[None]:
        if p is None:
            p = partition_of(key, self.cfg.inputs.partitions)
        box = self._open.get(p)
        if box is None:
            box = self._open[p] = _Open(asyncio.get_running_loop().create_future())
        box.records.append(Packed(key, at, msgspec.Raw(value)))
        box.size += len(value) + len(key) + _PACKED
        box.inputs += not key.startswith(TICK)  # ticks, the watch's word, lists: internal
        if box.size >= self.envelope_bytes:
            self._ready.append((p, self._open.pop(p)))
        return box.acked

    async def _go(self) -> None:
        """Send what is full; what is open goes `linger_s` after the first of it came."""
        if self.linger_s <= 0:
            await self.flush()
            return
        if self._ready:
            await self._drain()
        if self._open and self._linger is None:
            self._linger = asyncio.create_task(self._lingered())

    async def _lingered(self) -> None:
        try:
            await self.clock.sleep(self.linger_s)
        finally:
            self._linger = None
        await self.flush()

    async def _drain(self) -> None:
        async with self._sending:
            while self._ready:
                p, box = self._ready.pop(0)
                try:
                    sent = await self._producer.send(
                        self.cfg.inputs.name,
                        value=envelope(box.records),
                        key=ENVELOPE_KEY,
                        partition=p,
                    )
                except Exception as exc:  # noqa: BLE001 — every waiter of it must hear
                    box.acked.set_exception(exc)
                    continue
                sent.add_done_callback(lambda f, box=box: self._acked(f, box))
                self.envelopes.inc()

    def _acked(self, sent: asyncio.Future[object], box: _Open) -> None:
        if box.acked.done():
            return
        if sent.cancelled():
            box.acked.cancel()
        elif (exc := sent.exception()) is not None:
            box.acked.set_exception(exc)
        else:
            self.records.inc(box.inputs)
            box.acked.set_result(None)


class KafkaIntake:
    """serve's HTTP edge (`sources.http.make_app`: auth, decoding, 400/503, probes, metrics)
    with the broker as its store: `take` returns once every record is acked. `sources`:
    whether the ingest's watch is ready (synced, none failing), where it runs one."""

    def __init__(
        self, publisher: Publisher, sources: Callable[[], tuple[bool, str]] | None = None
    ) -> None:
        self.publisher = publisher
        self.sources = sources

    async def take(self, inputs: list[Input], kind: str, body: bytes) -> str | None:
        try:
            await self.publisher.publish(body)
        except KafkaError as exc:
            return f"broker did not acknowledge: {exc!r}; retry"
        return None

    def healthy(self) -> tuple[bool, str]:
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self.publisher.started:
            return False, "producer not started"
        if self.sources is not None:
            return self.sources()
        return True, "producer started"


def make_ingest_app(
    publisher: Publisher,
    registry: CollectorRegistry,
    token: TokenSource,
    metrics: SourceMetrics | None = None,
    sources: Callable[[], tuple[bool, str]] | None = None,
) -> web.Application:
    metrics = metrics if metrics is not None else SourceMetrics.on(registry)
    return make_app(KafkaIntake(publisher, sources), registry, token, metrics)
