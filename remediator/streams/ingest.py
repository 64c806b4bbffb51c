"""The ingest: webhooks and watch events onto the input topic, 2xx only once acked.

`Publisher` cuts each body by pod key (`streams.keys.split`) and sends every record
with acks=all on an idempotent producer; the HTTP answer waits for all of them, so
a 202 means the broker has the input and a 5xx means the sender must retry (a
retried body is harmless: the core's decisions are idempotent by incident). The HTTP
edge is serve's own (`KafkaIntake` behind `sources.http.make_app`): the same auth, the
same 400s for bad input, the same probes and metrics.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry, Counter

from remediator.inputs.records import Input
from remediator.runtime.clock import Clock, ClusterTime, SystemClock
from remediator.sources.http import TokenSource, make_app
from remediator.sources.metrics import SourceMetrics
from remediator.streams.config import StreamsConfig
from remediator.streams.core import tick_record
from remediator.streams.keys import BROADCAST, NOW_HEADER, arrived, split


class Publisher:
    def __init__(
        self,
        cfg: StreamsConfig,
        registry: CollectorRegistry | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.cfg = cfg
        # Every record carries the cluster's time it arrived at (`keys.arrived`).
        self.cluster = ClusterTime(clock if clock is not None else SystemClock())
        self._producer = AIOKafkaProducer(
            bootstrap_servers=cfg.bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=2,
            client_id=f"{cfg.group}-ingest",
        )
        registry = registry if registry is not None else CollectorRegistry()
        self.records = Counter(
            "remediator_ingest_records_total", "Records acked by the broker.", registry=registry
        )
        self.started = False

    async def start(self) -> None:
        await self._producer.start()
        self.started = True

    async def stop(self) -> None:
        await self._producer.stop()

    async def publish(self, body: bytes) -> int:
        """Send `body`'s records; returns how many, once the broker acked every one."""
        records, acks = await self.enqueue(body)
        await asyncio.gather(*acks)
        self.records.inc(len(acks))
        return records

    async def enqueue(self, body: bytes) -> tuple[int, list[asyncio.Future[object]]]:
        """Hand `body`'s records to the producer, in order; their acks come later. A
        caller that needs many bodies in flight (a bench, a relist) keeps their order."""
        records = split(body)
        acks = []
        now = arrived(records, self.cluster)
        headers = [] if now is None else [(NOW_HEADER, repr(now).encode())]
        for r in records:
            targets = range(self.cfg.inputs.partitions) if r.key == BROADCAST else [None]
            for p in targets:
                acks.append(await self._send(r.key, r.value, p, headers))
        return len(records), acks

    async def tick(self, at: float) -> None:
        """Move every partition's clock to `at` (the cluster's time)."""
        await asyncio.gather(*await self.enqueue_tick(at))

    async def enqueue_tick(self, at: float) -> list[asyncio.Future[object]]:
        """A tick to every partition, in order after what was enqueued; its acks come later."""
        value = tick_record(at)
        return [await self._send("\x00tick", value, p) for p in range(self.cfg.inputs.partitions)]

    async def _send(
        self,
        key: str,
        value: bytes,
        partition: int | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> asyncio.Future[object]:
        future: asyncio.Future[object] = await self._producer.send(
            self.cfg.inputs.name,
            value=value,
            key=key.encode(),
            partition=partition,
            headers=headers or None,
        )
        return future


class KafkaIntake:
    """serve's HTTP edge (`sources.http.make_app`: auth, decoding, 400/503, probes, metrics)
    with the broker as its store: `take` returns once every record is acked."""

    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher

    async def take(self, inputs: list[Input], kind: str, body: bytes) -> str | None:
        try:
            await self.publisher.publish(body)
        except KafkaError as exc:
            return f"broker did not acknowledge: {exc!r}; retry"
        return None

    def healthy(self) -> tuple[bool, str]:
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if self.publisher.started:
            return True, "producer started"
        return False, "producer not started"


def make_ingest_app(
    publisher: Publisher, registry: CollectorRegistry, token: TokenSource
) -> web.Application:
    return make_app(KafkaIntake(publisher), registry, token, SourceMetrics.on(registry))
