"""The real service on its own event loop in a thread, and a raw HTTP/1.1 client.

Raw sockets, because the inputs under test are ones a polite client refuses to send:
non-UTF-8 header values, lying Content-Encoding, bodies that are not what the headers say."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from remediator.runtime.service import Service, ServiceConfig

Header = tuple[bytes, bytes]


@contextmanager
def service_in_thread(cfg: ServiceConfig) -> Iterator[Service]:
    """Service.start() on a loop of its own, so synchronous (hypothesis) tests can call it."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="service-loop", daemon=True)
    thread.start()

    async def start() -> Service:
        svc = Service(replace(cfg, watch=False))
        await svc.start()
        return svc

    service = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=60)
    try:
        yield service
    finally:
        asyncio.run_coroutine_threadsafe(service.stop(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@dataclass(frozen=True)
class Reply:
    status: int  # 0: the server closed without answering
    head: bytes
    body: bytes


def post(port: int, headers: list[Header], body: bytes, path: bytes = b"/events") -> Reply:
    """One POST on a fresh connection; Content-Length is set from the body."""
    lines = [b"POST " + path + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name + b": " + value for name, value in headers]
    lines.append(b"Content-Length: %d" % len(body))
    request = b"\r\n".join(lines) + b"\r\n\r\n" + body
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        # answered and closed before reading everything: still read what it said
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(request)
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return Reply(status, head, rest)
