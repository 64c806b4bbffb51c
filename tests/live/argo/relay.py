"""A loopback HTTP relay in front of the real Argo Server, for the one fault it cannot make:
the client losing the answer to a submit the server carried out. Every request is passed on
unchanged; when `on_submitted` is set, the relay calls it once the real server has answered a
submit, then drops the client's connection without a reply."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.standins.loopback import LoopbackServer


class Relay:
    def __init__(self, target: str) -> None:
        split = urlsplit(target)
        self.host, self.port_to = split.hostname or "127.0.0.1", split.port or 80
        self.on_submitted: Callable[[int, bytes], None] | None = None
        self.submits: list[int] = []  # the real server's status for each submit passed on
        self._lock = threading.Lock()
        self._server = LoopbackServer(_handler(self))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.port}"

    def close(self) -> None:
        self._server.close()

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port_to, timeout=30)
        try:
            conn.request(method, path, body=body or None, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()


def _handler(relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            keep = ("Authorization", "Content-Type", "Accept", "User-Agent")
            headers = {k: v for k, v in self.headers.items() if k in keep}
            status, resp_headers, data = relay.forward(self.command, self.path, headers, body)
            if self.command == "POST" and self.path.endswith("/submit"):
                with relay._lock:
                    relay.submits.append(status)
                    hook, relay.on_submitted = relay.on_submitted, None
                if hook is not None:
                    hook(status, data)
                    self.close_connection = True
                    return  # the answer is lost
            self.send_response(status)
            for k, v in resp_headers:
                if k.lower() in ("content-type", "grpc-metadata-content-type"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler
