"""POST /v1/traces: OTLP/HTTP traces in, vLLM's start-up spans out to the core.

The OTLP/HTTP protocol (opentelemetry-proto's `ExportTraceServiceRequest`), as vLLM's own
exporter (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`) or a collector's `otlphttp`
exporter sends it, with the bearer token /events takes (`Authorization: Bearer ...`, e.g.
`OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Bearer%20TOKEN`):

    Content-Type     application/x-protobuf or application/json (OTLP/JSON); else 415
    Content-Encoding gzip, deflate or none (br, zstd where aiohttp has them); else 415
    200  ExportTraceServiceResponse in the request's encoding: empty when every span was
         taken, else partial_success (rejected_spans, error_message: the first reason), for
         start-up spans that cannot be attributed to a pod. Kept spans are stored first
         (the inbox, as /events): fed to the core even after a crash.
    400  the body does not decode (bad protobuf or JSON, bad gzip): nothing of it is kept
    401  no or wrong token; 408 body too slow; 503 not stored (Retry-After: the exporter
         retries), or no token to compare with

Every error answer is a google.rpc.Status (code, message) in the request's encoding, as
the spec asks. What a span means is inputs.otlp's and inputs.vllm_spans' to say.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from remediator.inputs.otlp import CONTENT_TYPES, PROTOBUF, TraceBatch, decode_traces
from remediator.inputs.records import InputError
from remediator.logfields import get_logger
from remediator.sources.metrics import SourceMetrics

log = get_logger(__name__)

PATH = "/v1/traces"
ENCODINGS = ("", "identity", "gzip", "x-gzip", "deflate", "br", "zstd")  # aiohttp inflates
# google.rpc.Code for each answer that is not a 200
_CODES = {400: 3, 401: 16, 408: 4, 415: 3, 503: 14}

Check = Callable[[web.Request], Awaitable[bool | str]]  # True, False (401), or why not (503)
Take = Callable[[TraceBatch, bytes], Awaitable[str | None]]  # None once stored, or why not


def status_body(content_type: str, status: int, message: str) -> bytes:
    """A google.rpc.Status {code, message}: protobuf by hand (two fields), or JSON."""
    code = _CODES.get(status, 2)
    if content_type != PROTOBUF:
        return orjson.dumps({"code": code, "message": message})
    text = message.encode()
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def response_body(content_type: str, batch: TraceBatch) -> bytes:
    """The ExportTraceServiceResponse: partial_success only when spans were rejected."""
    if content_type != PROTOBUF:
        if not batch.rejected:
            return b"{}"
        partial = {"rejectedSpans": str(batch.rejected), "errorMessage": batch.why}
        return orjson.dumps({"partialSuccess": partial})
    answer = ExportTraceServiceResponse()
    if batch.rejected:
        answer.partial_success.CopyFrom(
            ExportTracePartialSuccess(rejected_spans=batch.rejected, error_message=batch.why)
        )
    return answer.SerializeToString()


def content_type_of(request: web.Request) -> str:
    return request.headers.get("Content-Type", "").split(";")[0].strip().lower()


class Traces:
    """The handler, given the webhooks' bearer check and the intake's `take`."""

    def __init__(
        self,
        check: Check,
        take: Take,
        metrics: SourceMetrics,
        body_timeout_s: float,
    ) -> None:
        self._check, self._take = check, take
        self._metrics, self._body_timeout_s = metrics, body_timeout_s

    async def handle(self, request: web.Request) -> web.Response:
        ctype = content_type_of(request)
        answer_type = ctype if ctype in CONTENT_TYPES else "application/json"
        admitted = await self._check(request)
        if admitted is not True:
            status = 503 if isinstance(admitted, str) else 401
            why = admitted if isinstance(admitted, str) else "missing or wrong bearer token"
            return self._error(request, answer_type, status, why)
        if ctype not in CONTENT_TYPES:
            why = f"Content-Type {ctype or 'none'!r}: send application/x-protobuf or JSON"
            return self._error(request, answer_type, 415, why)
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ENCODINGS:
            why = f"Content-Encoding {encoding!r}: send gzip or none"
            return self._error(request, answer_type, 415, why)
        try:
            body = await asyncio.wait_for(request.read(), self._body_timeout_s)
        except web.RequestPayloadError as exc:  # a gzip body that does not inflate
            resp = self._error(request, answer_type, 400, f"body unreadable: {exc}")
            request.content.feed_eof()  # not read again by aiohttp's lingering close
            resp.force_close()
            return resp
        except TimeoutError:
            why = f"request body not received within {self._body_timeout_s:g}s"
            return self._error(request, answer_type, 408, why)
        return await self._decode(request, ctype, body)

    async def _decode(self, request: web.Request, ctype: str, body: bytes) -> web.Response:
        try:
            batch = decode_traces(body, ctype)
            if batch.spans:
                stored = orjson.dumps(batch.stored())
                unavailable = await self._take(batch, stored)
                if unavailable is not None:
                    return self._error(request, ctype, 503, unavailable)
        except InputError as exc:
            return self._error(request, ctype, 400, str(exc))
        self._count(batch)
        body_out = response_body(ctype, batch)
        return web.Response(status=200, body=body_out, content_type=ctype)

    def _count(self, batch: TraceBatch) -> None:
        kept = len(batch.spans)
        self._metrics.inputs.labels("otlp").inc(kept)
        self._metrics.spans.labels("kept").inc(kept)
        self._metrics.spans.labels("rejected").inc(batch.rejected)
        self._metrics.spans.labels("ignored").inc(batch.total - kept - batch.rejected)
        if batch.rejected:
            log.warning(
                "spans rejected", extra={"rejected": batch.rejected, "error": batch.why[:300]}
            )

    def _error(self, request: web.Request, ctype: str, status: int, why: str) -> web.Response:
        why = " ".join(why.split())[:500].encode("utf-8", "backslashreplace").decode()
        if status in (400, 408, 415):
            self._metrics.input_errors.labels("otlp").inc()
        elif status == 503:
            self._metrics.refused.inc()
        log.warning("traces refused", extra={"status": status, "error": why})
        body = status_body(ctype, status, why)
        resp = web.Response(status=status, body=body, content_type=ctype)
        if status == 503:
            resp.headers["Retry-After"] = "1"  # the exporter retries (OTLP: 503 is retryable)
        if request.content.exception() is not None or status == 408:
            request.content.feed_eof()  # a body that broke: not read again on close
            resp.force_close()
        return resp
