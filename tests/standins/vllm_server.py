"""A stand-in vLLM OpenAI-compatible server: POST /v1/completions (streaming) and GET /metrics.

No GPU here, so no real engine can answer; the stand-in is also how faults are injected that a
healthy vLLM would not show on demand: a slow first token, an error, no answer at all.

It answers a streaming completion as vLLM does (server-sent events, `data: {...}` per chunk,
`data: [DONE]` last), checks the request (model, max_tokens, stream), records it, tracks how
many requests it served at once, and exports `vllm:time_to_first_token_seconds` for the
requests it answered, measured as vLLM measures it (arrival to first token).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.standins.loopback import LoopbackServer


@dataclass
class VllmStandin:
    model: str
    first_token_s: float = 0.0  # delay before the first token
    mode: str = "ok"  # ok | error | silent (accepts, never answers)
    requests: list[dict[str, Any]] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _release: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._server = LoopbackServer(self._handler())

    @property
    def port(self) -> int:
        return self._server.port

    def close(self) -> None:
        self._release.set()  # silent requests end
        self._server.close()

    def __enter__(self) -> VllmStandin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def metrics_text(self) -> str:
        lines = [
            "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
            "# TYPE vllm:time_to_first_token_seconds histogram",
        ]
        label = f'model_name="{self.model}"'
        for le in (0.1, 0.5, 1.0, 5.0, float("inf")):
            n = sum(1 for t in self.ttfts if t <= le)
            bound = "+Inf" if le == float("inf") else f"{le}"
            lines.append(f'vllm:time_to_first_token_seconds_bucket{{{label},le="{bound}"}} {n}.0')
        lines.append(f"vllm:time_to_first_token_seconds_sum{{{label}}} {sum(self.ttfts)}")
        lines.append(f"vllm:time_to_first_token_seconds_count{{{label}}} {len(self.ttfts)}.0")
        return "\n".join(lines) + "\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self._json(404, {"detail": "Not Found"})
                    return
                body = stand.metrics_text().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                arrived = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                stand.requests.append(body)
                if self.path != "/v1/completions":
                    self._json(404, {"detail": "Not Found"})
                    return
                if body.get("model") != stand.model:
                    msg = f"The model `{body.get('model')}` does not exist."
                    self._json(404, {"object": "error", "message": msg, "code": 404})
                    return
                if body.get("max_tokens") != 1 or body.get("stream") is not True:
                    stand.problems.append(f"not a streaming 1-token probe: {body}")
                stand._enter()
                try:
                    self._answer(arrived)
                finally:
                    stand._leave()

            def _answer(self, arrived: float) -> None:
                if stand.mode == "error":
                    self._json(500, {"object": "error", "message": "engine dead", "code": 500})
                    return
                if stand.mode == "silent":
                    stand._release.wait(60)
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                time.sleep(stand.first_token_s)
                stand.ttfts.append(time.monotonic() - arrived)
                chunk = {
                    "id": "cmpl-standin",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": stand.model,
                    "choices": [
                        {"index": 0, "text": " Hi", "logprobs": None, "finish_reason": "length"}
                    ],
                    "usage": None,
                }
                for event in (f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"):
                    data = event.encode()
                    self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            def _json(self, code: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
