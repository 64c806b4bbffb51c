"""The HTTP edge (aiohttp): webhooks in, health and metrics out.

    POST /events   Alertmanager webhook (v4), a CloudEvent (structured, or binary mode
                   with ce-* headers), or a raw Kubernetes watch event. Bearer token.
                   202 {"accepted": N}: decoded and stored in the state file (the
                   inbox), all of it; fed to the core even after a crash.
                   503 {"error": ...}: not stored (the state file refuses writes, the
                   backlog is full, shutting down, no webhook token to compare with: its
                   file missing or empty): the sender retries. One log line per cause,
                   not per request.
                   400 {"error": ...}: nothing of the body was applied (bad JSON,
                   bad encoding, bad CloudEvent...): one warning line, no traceback.
                   401: no or wrong token (one warning line).
    POST /v1/traces  OTLP/HTTP traces (protobuf or JSON): vLLM's start-up spans, the
                   same bearer token; answered as OTLP asks (sources/otlp.py).
    GET  /healthz  200 while the process and its loop are alive (liveness).
    GET  /readyz   200 once the policy is loaded and every watch has synced, while
                   webhooks can be stored and there is a webhook token to compare with.
    GET  /metrics  Prometheus text exposition of the service's registry.
    GET  /timelines[?namespace=NS&state=STATE]   every tracked pod's cold start, one JSON
                   object per line (application/x-ndjson): the `timeline` lines replay prints.
    GET  /timelines/{namespace}/{pod}   that pod's timelines (a recreated pod has several,
                   oldest first); 404 when none is tracked.

A body is decoded entirely before anything is queued, so a bad alert among good ones
refuses the whole body: the sender retries it, nothing is half-applied.

A connection that sends no complete request for `idle_timeout_s` (75 s, as nginx and
Go's net/http) is closed: one that never sends, one that trickles its headers, one kept
alive after its last request; a body not received whole within the same time is a 408
and the connection is closed (a slow body would otherwise hold its handler forever).
`remediator_http_connections_open` shows how many are open.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from cloudevents.v1.exceptions import GenericException
from cloudevents.v1.http import from_http
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from remediator.inputs.decode import decode, normalize
from remediator.inputs.otlp import TraceBatch
from remediator.inputs.records import AlertSeen, Input, InputError
from remediator.logfields import get_logger
from remediator.sources import otlp
from remediator.sources.metrics import SourceMetrics

log = get_logger(__name__)

MAX_BODY = 4 * 1024 * 1024  # an Alertmanager group of many alerts stays far below this
IDLE_TIMEOUT_S = 75.0  # a connection with no complete request for this long is closed
STRUCTURED = "application/cloudevents+json"

TokenSource = Callable[[], str]  # the expected bearer token, re-read on each call
Timelines = Callable[[], Iterable[dict[str, Any]]]  # the `timeline` objects, read on request
NDJSON = "application/x-ndjson"


class Intake(Protocol):
    """Where accepted inputs go. `take` returns once they are stored (None) or says why they
    are not (a 503 the sender retries); it may refuse a body with InputError (a 400)."""

    async def take(self, inputs: list[Input], kind: str, body: bytes) -> str | None: ...
    def healthy(self) -> tuple[bool, str]: ...
    def ready(self) -> tuple[bool, str]: ...


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listen:
        """`host:port`, `:port` (all interfaces) or `[v6]:port`."""
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"listen address {text!r}: expected HOST:PORT, e.g. 0.0.0.0:8080")
        return cls(host.strip("[]") or "0.0.0.0", int(port))


def _error(status: int, message: str, **more: Any) -> web.Response:
    body = orjson.dumps({"error": message, **more})
    return web.Response(status=status, body=body, content_type="application/json")


def _given_token(request: web.Request) -> bytes | None:
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not given:
        return None
    try:
        return given.strip().encode()
    except UnicodeEncodeError:  # aiohttp keeps non-UTF-8 header bytes as lone surrogates
        return None


# Pauses between reads of a token that did not match, or was not there: a file being
# rewritten in place is empty, then half written, for a moment. ~0.9 s in all; a wrong
# token that reads the same twice is answered after the first pause.
SETTLE_S = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
GRACE_S = 10.0  # a token admitted this recently still is while its file is mid-rewrite


class BearerToken:
    """The token POST /events requires, read from its source on every request, so a rotated
    secret is picked up. A read may meet a file mid-rewrite (empty, or half written), so a
    token that does not match, or a file with no token, is read again (for ~1 s, unless the
    same other token is read twice) before the answer. A file still in flux after that
    (empty, missing, or a beginning of the token given) admits the token last admitted, for
    `grace_s` after it was: a good token is never refused for a moment's truncation, and a
    complete other token in the file ends the grace at once. No token at all, after that, is
    why the request is unavailable (503: the sender retries), never a crash."""

    def __init__(
        self,
        source: TokenSource,
        settle_s: tuple[float, ...] = SETTLE_S,
        grace_s: float = GRACE_S,
    ) -> None:
        self._source = source
        self._settle_s = settle_s
        self._grace_s = grace_s
        self._good: tuple[bytes, float] | None = None  # the token last admitted, and when

    def read(self) -> tuple[bytes | None, str]:
        """(the token, "") or (None, why there is none)."""
        try:
            value = self._source().strip()
        except (RuntimeError, OSError, ValueError) as exc:  # MissingSecret, not UTF-8, ...
            return None, f"webhook token unavailable: {_printable(str(exc))}"
        if not value:
            return None, "webhook token unavailable: empty"
        return value.encode(), ""

    async def check(self, given: bytes | None) -> bool | str:
        """True: admitted; False: no or wrong token (401); a string: no token to compare
        with (503, and why)."""
        expected, why = self.read()
        if given is None:
            return why if expected is None else False
        before: bytes | None = None
        for pause in (*self._settle_s, None):
            if expected is not None and hmac.compare_digest(given, expected):
                self._good = (given, time.monotonic())
                return True
            if expected is not None and expected == before and not given.startswith(expected):
                break  # a whole other token, read twice: simply the wrong one
            if pause is None:
                break
            before = expected
            await asyncio.sleep(pause)
            expected, why = self.read()
        if (expected is None or given.startswith(expected)) and self._in_grace(given):
            return True  # the file is still being written: the token it held a moment ago
        return why if expected is None else False

    def _in_grace(self, given: bytes) -> bool:
        good = self._good
        if good is None or time.monotonic() - good[1] > self._grace_s:
            return False
        return hmac.compare_digest(given, good[0])


# What the CloudEvents SDK raises on a bad binary-mode event besides its own errors: it
# decodes and parses the body itself (UnicodeDecodeError, JSONDecodeError, RecursionError).
_SDK_BAD_INPUT = (GenericException, ValueError, TypeError, AttributeError, RecursionError)


def _ce_headers_utf8(headers: Any) -> None:
    """A binary-mode event's attributes are its ce-* headers: every one must be UTF-8 text
    (CloudEvents HTTP binding 3.1.3.2). aiohttp keeps other bytes as lone surrogates, which
    the SDK would quote into an error nothing can encode."""
    for name, value in headers.items():
        if name.lower().startswith("ce-") and not _utf8(value):
            raise InputError(f"header {_printable(name)} is not UTF-8 text")


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _printable(text: str) -> str:
    """`text` with any byte that is not UTF-8 shown as an escape, for a log line or an answer."""
    return text.encode("utf-8", "backslashreplace").decode()


def _decode_body(headers: Any, body: bytes) -> tuple[list[Input], str, bytes]:
    """(inputs, kind, what `decode` makes the same inputs from) or InputError. Binary-mode
    CloudEvents go through the SDK and are kept as the structured event they are.

    The content type decides the mode (CloudEvents HTTP binding 3.1): structured whenever it
    is application/cloudevents+json, even if ce-* headers came along."""
    ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype != STRUCTURED and any(k.lower().startswith("ce-") for k in headers):
        _ce_headers_utf8(headers)
        try:
            event = from_http(dict(headers), body)
        except _SDK_BAD_INPUT as exc:
            raise InputError(f"binary-mode CloudEvent: {exc!s:.200}") from None
        doc = {**event.get_attributes(), "data": event.data}
        inputs = normalize(doc)
        try:
            stored = orjson.dumps(doc, default=str)
        except TypeError as exc:
            raise InputError(f"binary-mode CloudEvent: {exc!s:.200}") from None
        return inputs, "cloudevent-binary", stored
    if ctype == STRUCTURED:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or "specversion" not in doc:
            raise InputError(f"{STRUCTURED} body without specversion")
        return normalize(doc), "cloudevent", body
    inputs = decode(body)
    return inputs, "webhook", body


def _ndjson(docs: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(d) + b"\n" for d in docs)


def timeline_routes(app: web.Application, timelines: Timelines) -> None:
    """GET /timelines and /timelines/{namespace}/{pod}: the same JSON lines replay prints."""

    async def every(request: web.Request) -> web.Response:
        ns, state = request.query.get("namespace"), request.query.get("state")
        docs = (
            d
            for d in timelines()
            if (ns is None or d["namespace"] == ns) and (state is None or d["state"] == state)
        )
        return web.Response(body=_ndjson(docs), content_type=NDJSON)

    async def one(request: web.Request) -> web.Response:
        ns, pod = request.match_info["namespace"], request.match_info["pod"]
        docs = [d for d in timelines() if d["namespace"] == ns and d["pod"] == pod]
        if not docs:
            return _error(404, f"no timeline for pod {ns}/{pod}")
        return web.Response(body=_ndjson(docs), content_type=NDJSON)

    app.router.add_get("/timelines", every)
    app.router.add_get("/timelines/{namespace}/{pod}", one)


def _closing(request: web.Request, resp: web.Response) -> web.Response:
    """Answer, then close without reading the rest of a body that cannot be decoded: aiohttp's
    lingering close would read it again and log the same error as an unhandled exception."""
    request.content.feed_eof()
    resp.force_close()
    return resp


def make_app(
    intake: Intake,
    registry: CollectorRegistry,
    token: TokenSource,
    metrics: SourceMetrics,
    timelines: Timelines | None = None,
    body_timeout_s: float = IDLE_TIMEOUT_S,
) -> web.Application:
    bearer = BearerToken(token)

    async def events(request: web.Request) -> web.Response:
        admitted = await bearer.check(_given_token(request))
        if isinstance(admitted, str):  # no token to compare with: nobody can be admitted
            resp = _unavailable(admitted)
            return _closing(request, resp) if request.content.exception() else resp
        if not admitted:
            log.warning("webhook refused", extra={"status": 401, "error": "bearer token"})
            resp = _error(401, "missing or wrong bearer token", hint="Authorization: Bearer ...")
            return _closing(request, resp) if request.content.exception() else resp
        try:
            body = await asyncio.wait_for(request.read(), body_timeout_s)
        except web.RequestPayloadError as exc:  # e.g. a Content-Encoding it does not decode to
            return _closing(request, _refused(f"body unreadable: {exc}", None))
        except TimeoutError:
            why = f"request body not received within {body_timeout_s:g}s"
            metrics.input_errors.labels("http").inc()
            log.warning("webhook refused", extra={"status": 408, "error": why})
            return _closing(request, _error(408, why, accepted=0))
        try:
            inputs, kind, stored = _decode_body(request.headers, body)
            unavailable = await intake.take(inputs, kind, stored)
        except InputError as exc:  # the body, or the intake's own reading of it (Kafka's cut)
            return _refused(str(exc), len(body))
        if unavailable is not None:
            return _unavailable(unavailable)
        said.clear()
        metrics.inputs.labels("http").inc(len(inputs))
        for item in inputs:
            if isinstance(item, AlertSeen):
                metrics.alerts.labels(item.alertname, item.status).inc()
        return web.json_response({"accepted": len(inputs), "kind": kind}, status=202)

    def _refused(error: str, size: int | None) -> web.Response:
        """400: nothing of the body was applied. One log line, no traceback."""
        error = _printable(" ".join(error.split())[:500])  # one line, bounded, encodable
        metrics.input_errors.labels("http").inc()
        log.warning("webhook refused", extra={"status": 400, "error": error, "bytes": size})
        return _error(400, error, accepted=0)

    said: list[str] = []  # the last 503 cause logged: one line per cause, not per request

    def _unavailable(why: str) -> web.Response:
        """503: not stored; the sender retries (Alertmanager does, for anything not 2xx)."""
        metrics.refused.inc()
        cause = why.split(":")[0]
        if said != [cause]:
            said[:] = [cause]
            log.error("webhook not accepted: 503", extra={"status": 503, "error": why[:500]})
        resp = _error(503, why[:500], accepted=0)
        resp.headers["Retry-After"] = "1"
        return resp

    async def healthz(request: web.Request) -> web.Response:
        ok, why = intake.healthy()
        return web.json_response({"ok": ok, "detail": why}, status=200 if ok else 503)

    async def readyz(request: web.Request) -> web.Response:
        ok, why = intake.ready()
        token, missing = bearer.read()
        if token is None:  # every webhook would be refused
            ok, why = False, missing
        return web.json_response({"ready": ok, "detail": why}, status=200 if ok else 503)

    async def metrics_handler(request: web.Request) -> web.Response:
        resp = web.Response(body=generate_latest(registry))
        resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return resp

    async def check(request: web.Request) -> bool | str:
        return await bearer.check(_given_token(request))

    async def take(batch: TraceBatch, stored: bytes) -> str | None:
        inputs: list[Input] = list(batch.spans)
        unavailable = await intake.take(inputs, "otlp", stored)
        if unavailable is None:
            said.clear()
        return unavailable

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/events", events)
    app.router.add_post(otlp.PATH, otlp.Traces(check, take, metrics, body_timeout_s).handle)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
    if timelines is not None:
        timeline_routes(app, timelines)
    return app


class _ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log, where a request its parser refuses (answered 400: a bad header
    byte, a duplicate Content-Type, an encoding it cannot decode) is one warning line, not an
    error with a traceback. Anything else (our bug: a 500) keeps its traceback."""

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kw: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            error = " ".join(str(exc_info.message).split())[:300]
            self.logger.warning(
                "request refused by the HTTP parser",
                extra={"status": exc_info.code, "error": error},
            )
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kw)


class _Connections(Collector):
    """Open HTTP connections, read from the server at scrape time."""

    def __init__(self, runner: web.AppRunner) -> None:
        self._runner = runner

    def collect(self) -> Iterable[Metric]:
        server = self._runner.server
        yield GaugeMetricFamily(
            "remediator_http_connections_open",
            "HTTP connections open now; one with no complete request for the idle timeout "
            "is closed.",
            value=len(server.connections) if server is not None else 0,
        )


async def serve_app(
    app: web.Application,
    listen: Listen,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    registry: CollectorRegistry | None = None,
) -> tuple[web.AppRunner, int]:
    """Start the app; returns the runner (to clean up) and the bound port (for port 0).
    aiohttp's keep-alive timer runs from the connection's start (since aio-libs/aiohttp
    #13681; hence aiohttp>=3.14.5), so it closes a connection that never sends a request
    as well as one idle after its last."""
    server_log = _ServerLog(logging.getLogger("aiohttp.server"), {})
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        logger=server_log,
        keepalive_timeout=idle_timeout_s,
    )
    await runner.setup()
    if registry is not None:
        registry.register(_Connections(runner))
    site = web.TCPSite(runner, listen.host, listen.port)
    await site.start()
    addresses = runner.addresses
    port = addresses[0][1] if addresses else listen.port
    return runner, int(port)
