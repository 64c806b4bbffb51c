"""A stand-in Slack Web API: chat.postMessage, conversations.history and
conversations.replies, as slack_sdk calls them.

It records every request, checks the token, the channel, the fallback text, the
Block Kit shape (types, limits) and that a thread_ts names a message it posted,
answers like Slack (`{"ok": true, "ts": ...}`; `{"ok": false, "error": ...}`
with HTTP 200), and can answer 429 with Retry-After, as Slack rate-limits. It can
also take a post and drop the connection before answering (`drop_answer_next`: the
post went through, the poster never heard), and refuse history reads with
missing_scope (`history_scope=False`). Message ts are wall time, as Slack's are.

Slack itself cannot run here, so its failures are scripted (`fail_next`, `answer_next`):
each class Slack or a proxy in front of it is known to answer (FAULTS: Slack's own
transient `ok: false` errors with HTTP 200, a proxy's HTML page, a 5xx, JSON cut off
after the post was taken, an answer slower than the client waits, a connection reset),
or any status, content type and body a test makes up.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.standins.loopback import LoopbackServer


@dataclass(frozen=True)
class Answer:
    """One scripted answer. `taken`: the request is handled as usual first (a post goes
    through), then this is what the caller hears; `delay_s` before answering; status 0:
    the connection closes with no answer."""

    status: int
    body: bytes = b""
    ctype: str = "application/json; charset=utf-8"
    taken: bool = False
    delay_s: float = 0.0


def _slack_error(code: str) -> Answer:
    return Answer(200, json.dumps({"ok": False, "error": code}).encode())


# Every failure class a caller of Slack's Web API meets, by name.
FAULTS: dict[str, Answer] = {
    # Slack's own transient errors, answered with HTTP 200 (docs.slack.dev, chat.postMessage)
    **{
        code: _slack_error(code)
        for code in (
            "internal_error",
            "fatal_error",
            "service_unavailable",
            "request_timeout",
            "ratelimited",
        )
    },
    # a proxy or load balancer in front of Slack
    "html": Answer(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
    "html_502": Answer(502, b"<html><body>Bad Gateway</body></html>", "text/html"),
    "server_error": Answer(503, b'{"ok": false, "error": "service_unavailable"}'),
    # the post went through; the answer stops half way
    "cut_off": Answer(200, b'{"ok": true, "channel": "C0REMEDIATE", "ts": "17', taken=True),
    # the post went through; the answer comes after the client stopped waiting (1 s)
    "slow": Answer(200, b'{"ok": true}', taken=True, delay_s=2.5),
    # the connection is reset before anything was taken
    "reset": Answer(0),
}

_BLOCK_TYPES = {"header", "section", "context", "divider", "actions", "image", "rich_text"}
_TEXT_LIMIT = {"header": 150, "section": 3000}


@dataclass
class Posted:
    method: str  # Slack method, e.g. chat.postMessage
    authorization: str | None
    body: dict[str, Any]
    status: int  # what the stand-in answered
    ts: str | None = None


@dataclass
class SlackStandin:
    token: str
    channels: frozenset[str] = frozenset({"C0REMEDIATE"})
    requests: list[Posted] = field(default_factory=list)
    history_scope: bool = True  # the token has channels:history
    _rate_limits: deque[int] = field(default_factory=deque)
    _answers: deque[Answer] = field(default_factory=deque)
    _drops: int = 0
    _next_ts: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: LoopbackServer | None = None

    def rate_limit_next(self, retry_after_s: int = 0, times: int = 1) -> None:
        """The next `times` calls get 429 with this Retry-After."""
        self._rate_limits.extend([retry_after_s] * times)

    def fail_next(self, fault: str, times: int = 1) -> None:
        """The next `times` calls meet this failure class (a name in FAULTS)."""
        self.answer_next(FAULTS[fault], times)

    def answer_next(self, answer: Answer, times: int = 1) -> None:
        """The next `times` calls get this answer."""
        self._answers.extend([answer] * times)

    def reset(self) -> None:
        """Forget every request and scripted answer (between a property test's examples)."""
        with self._lock:
            self.requests.clear()
            self._answers.clear()
            self._rate_limits.clear()
            self._drops = 0

    def drop_answer_next(self, times: int = 1) -> None:
        """The next `times` posts are taken, then the connection closes with no answer."""
        self._drops += times

    def posted(self) -> list[Posted]:
        """Messages Slack accepted."""
        return [r for r in self.requests if r.ts is not None]

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.port}/api/"

    def __enter__(self) -> SlackStandin:
        self._server = LoopbackServer(_handler(self))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def handle(
        self, path: str, auth: str | None, ctype: str, raw: bytes
    ) -> tuple[int, dict[str, str], dict[str, Any] | Answer]:
        with self._lock:
            scripted = self._answers.popleft() if self._answers else None
        if scripted is None:
            return self._handle(path, auth, ctype, raw)
        if scripted.taken:
            self._handle(path, auth, ctype, raw)
        else:
            self._log(path, ctype, raw, auth, scripted.status)
        time.sleep(scripted.delay_s)
        return scripted.status, {}, scripted

    def _log(self, path: str, ctype: str, raw: bytes, auth: str | None, status: int) -> None:
        url = urlsplit(path)
        method = url.path.removeprefix("/api/")
        with self._lock:
            self.requests.append(Posted(method, auth, _body(url.query, ctype, raw), status))

    def _handle(
        self, path: str, auth: str | None, ctype: str, raw: bytes
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        url = urlsplit(path)
        method = url.path.removeprefix("/api/")
        body = _body(url.query, ctype, raw)
        with self._lock:
            record = Posted(method, auth, body, 200)
            self.requests.append(record)
            if self._rate_limits:
                record.status = 429
                after = self._rate_limits.popleft()
                return 429, {"Retry-After": str(after)}, {"ok": False, "error": "ratelimited"}
            if auth != f"Bearer {self.token}":
                return 200, {}, {"ok": False, "error": "invalid_auth"}
            if method in ("conversations.history", "conversations.replies"):
                return 200, {}, self._read(method, body)
            if method != "chat.postMessage":
                return 200, {}, {"ok": False, "error": "unknown_method"}
            error = self._check(body)
            if error:
                return 200, {}, {"ok": False, "error": error}
            self._next_ts += 1
            record.ts = f"{int(time.time())}.{self._next_ts:06d}"
            if self._drops:
                self._drops -= 1
                return 0, {}, {}  # taken; no answer
            return 200, {}, {"ok": True, "channel": body["channel"], "ts": record.ts}

    def _read(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        """History (top-level and broadcast messages) or one thread, newest first, after
        `oldest`, paged by `limit` and `cursor`; metadata with include_all_metadata."""
        if not self.history_scope:
            return {"ok": False, "error": "missing_scope", "needed": "channels:history"}
        if args.get("channel") not in self.channels:
            return {"ok": False, "error": "channel_not_found"}
        oldest = float(args.get("oldest") or 0)
        with_meta = str(args.get("include_all_metadata")).lower() in ("1", "true")
        found = []
        for r in reversed(self.posted()):
            thread = r.body.get("thread_ts")
            if method == "conversations.history":
                shown = thread is None or bool(r.body.get("reply_broadcast"))
            else:
                shown = args.get("ts") in (r.ts, thread)
            if shown and r.body.get("channel") == args["channel"] and float(r.ts or 0) > oldest:
                msg = {"type": "message", "ts": r.ts, "text": r.body.get("text")}
                if with_meta and r.body.get("metadata"):
                    msg["metadata"] = r.body["metadata"]
                found.append(msg)
        start, limit = int(args.get("cursor") or 0), int(args.get("limit") or 100)
        page = found[start : start + limit]
        more = start + limit < len(found)
        cursor = str(start + limit) if more else ""
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": cursor},
        }

    def _check(self, body: dict[str, Any]) -> str | None:
        if body.get("channel") not in self.channels:
            return "channel_not_found"
        if not body.get("text"):
            return "no_text"  # slack_sdk warns; Slack needs it for notifications
        thread = body.get("thread_ts")
        if thread is not None and thread not in {r.ts for r in self.requests}:
            return "thread_not_found"
        blocks = body.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        return _check_blocks(blocks) if blocks is not None else None


def _body(query: str, ctype: str, raw: bytes) -> dict[str, Any]:
    if ctype.startswith("application/json"):
        return dict(json.loads(raw or b"{}"))
    return {k: v[0] for k, v in parse_qs(raw.decode() or query).items()}


def _check_blocks(blocks: Any) -> str | None:
    if not isinstance(blocks, list) or not 0 < len(blocks) <= 50:
        return "invalid_blocks"
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in _BLOCK_TYPES:
            return "invalid_blocks"
        text = block.get("text")
        if text is not None and len(text.get("text", "")) > _TEXT_LIMIT.get(kind, 3000):
            return "invalid_blocks"
        if kind == "header" and (text or {}).get("type") != "plain_text":
            return "invalid_blocks"
        if kind == "section" and text is None and not block.get("fields"):
            return "invalid_blocks"
        if len(block.get("fields", [])) > 10:
            return "invalid_blocks"
    return None


def _handler(standin: SlackStandin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.do_POST()

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, headers, payload = standin.handle(
                self.path,
                self.headers.get("Authorization"),
                self.headers.get("Content-Type", ""),
                raw,
            )
            if status == 0:  # the answer never comes
                self.close_connection = True
                return
            if isinstance(payload, Answer):
                data, ctype = payload.body, payload.ctype
            else:
                data, ctype = json.dumps(payload).encode(), "application/json; charset=utf-8"
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):  # a caller that stopped waiting has gone
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # keep test output clean

    return Handler
