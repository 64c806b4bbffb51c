"""The ingest: webhooks and watch events onto the input topic, 2xx only once acked.

`Publisher` cuts each body by pod key (`streams.keys.split`) and sends every record
with acks=all on an idempotent producer; the HTTP answer waits for all of them, so
a 202 means the broker has the input and a 5xx means the sender must retry (a
retried body is harmless: the core's decisions are idempotent by incident).
"""

from __future__ import annotations

import asyncio
import logging

import orjson
from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from cloudevents.v1.exceptions import GenericException
from cloudevents.v1.http import from_http
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from remediator.inputs.records import InputError
from remediator.sources.http import MAX_BODY, TokenSource, _authorized, _error
from remediator.streams.config import StreamsConfig
from remediator.streams.core import tick_record
from remediator.streams.keys import BROADCAST, split

log = logging.getLogger("remediator.ingest")


class Publisher:
    def __init__(self, cfg: StreamsConfig, registry: CollectorRegistry | None = None) -> None:
        self.cfg = cfg
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
        for r in records:
            targets = range(self.cfg.inputs.partitions) if r.key == BROADCAST else [None]
            for p in targets:
                acks.append(await self._send(r.key, r.value, p))
        return len(records), acks

    async def tick(self, at: float) -> None:
        """Move every partition's clock to `at` (stream time)."""
        value = tick_record(at)
        waits = [await self._send("\x00tick", value, p) for p in range(self.cfg.inputs.partitions)]
        await asyncio.gather(*waits)

    async def _send(self, key: str, value: bytes, partition: int | None) -> asyncio.Future[object]:
        future: asyncio.Future[object] = await self._producer.send(
            self.cfg.inputs.name, value=value, key=key.encode(), partition=partition
        )
        return future


def _body_of(headers: dict[str, str], body: bytes) -> bytes:
    """A binary-mode CloudEvent becomes the structured document the workers decode."""
    if any(k.lower().startswith("ce-") for k in headers):
        try:
            event = from_http(dict(headers), body)
        except GenericException as exc:
            raise InputError(f"binary-mode CloudEvent: {exc}") from None
        return orjson.dumps({**event.get_attributes(), "data": event.data})
    return body


def make_ingest_app(
    publisher: Publisher, registry: CollectorRegistry, token: TokenSource
) -> web.Application:
    async def events(request: web.Request) -> web.Response:
        if not _authorized(request, token):
            return _error(401, "missing or wrong bearer token", hint="Authorization: Bearer ...")
        try:
            n = await publisher.publish(_body_of(dict(request.headers), await request.read()))
        except InputError as exc:
            return _error(400, str(exc), accepted=0)
        except KafkaError as exc:
            log.error("broker did not ack", extra={"error": repr(exc)})
            return _error(503, f"broker did not acknowledge: {exc!r}; retry", accepted=0)
        return web.json_response({"accepted": n}, status=202)

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def readyz(request: web.Request) -> web.Response:
        ok = publisher.started
        return web.json_response({"ready": ok}, status=200 if ok else 503)

    async def metrics(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/events", events)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
