"""Issue 10 #11: an HTTP connection that sends no complete request is closed after the idle
timeout (a short one here), whether it sends nothing or trickles its headers; the open
connections are a metric. The real aiohttp server on 127.0.0.1:0, raw sockets as clients."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from remediator.sources.http import Listen, serve_app
from tests.runtime.conftest import wait_until


async def _ok(request: web.Request) -> web.Response:
    return web.Response(text="ok")


class Served:
    def __init__(self, runner: web.AppRunner, port: int, registry: CollectorRegistry) -> None:
        self.runner, self.port, self.registry = runner, port, registry

    def open_connections(self) -> float | None:
        return self.registry.get_sample_value("remediator_http_connections_open")


async def _serve(idle_timeout_s: float) -> Served:
    app = web.Application()
    app.router.add_get("/healthz", _ok)
    registry = CollectorRegistry()
    runner, port = await serve_app(app, Listen("127.0.0.1", 0), idle_timeout_s, registry)
    return Served(runner, port, registry)


@pytest.fixture
async def short() -> AsyncIterator[Served]:
    served = await _serve(idle_timeout_s=0.3)
    yield served
    await served.runner.cleanup()


async def test_a_connection_that_sends_nothing_is_closed(short: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", short.port)
    try:
        # b"": the server closed it. Before: open for aiohttp's default hour, so this timed out.
        assert await asyncio.wait_for(reader.read(1), timeout=10) == b""
    finally:
        writer.close()


async def test_a_connection_that_trickles_its_headers_is_closed(short: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", short.port)
    try:
        writer.write(b"POST /events HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the rest
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), timeout=10) == b""
    finally:
        writer.close()
    await wait_until(lambda: short.open_connections() == 0, timeout=10, what="gauge back to 0")


async def test_requests_still_work_and_open_connections_are_counted() -> None:
    served = await _serve(idle_timeout_s=60)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
        await wait_until(lambda: served.open_connections() == 1, timeout=10, what="one open")
        url = f"http://127.0.0.1:{served.port}/healthz"
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            assert resp.status == 200
        writer.close()
        await wait_until(lambda: served.open_connections() == 0, timeout=10, what="all closed")
    finally:
        await served.runner.cleanup()
