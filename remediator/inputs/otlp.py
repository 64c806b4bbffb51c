"""OTLP/HTTP trace requests → vLLM's start-up spans, by pod. Pure: bytes in, records out.

An `ExportTraceServiceRequest` (opentelemetry-proto), binary protobuf or OTLP/JSON (field
names in lowerCamelCase, trace and span ids in hex, 64-bit integers as decimal strings or
numbers; unknown fields ignored, as the spec asks). A span is kept when vLLM's start-up
names it (inputs.vllm_spans.SPANS); every other span is accepted and dropped, as a
collector's filter would. A kept span is attributed to its pod by its resource's
attributes (the Kubernetes semantic conventions):

    k8s.namespace.name, k8s.pod.name   required (OTEL_RESOURCE_ATTRIBUTES from the downward
                                       API, or a collector's k8sattributes processor)
    k8s.pod.uid                        optional: tells a recreated pod's lives apart

A kept span without them, or whose times are not a start and an end after it, is rejected
(the answer's partial_success counts it and says why); a body that does not decode as the
request is refused whole (InputError). Each kept span becomes an `EngineSpan` document
(`{"kind": "EngineSpan", ...}`, times in integer nanoseconds, exact) and its record, made
from that document, so what is stored decodes to the same records again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from remediator.inputs.records import JSON, EngineSpan, InputError
from remediator.inputs.vllm_spans import SPANS

PROTOBUF = "application/x-protobuf"
OTLP_JSON = "application/json"
CONTENT_TYPES = (PROTOBUF, OTLP_JSON)
NAMESPACE, POD, UID = "k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid"
SPAN_LIST = "EngineSpanList"  # the stored body: {"kind": SPAN_LIST, "items": [doc, ...]}
_NS = 1_000_000_000
_MAX_NS = 2**64 - 1  # fixed64


@dataclass(slots=True)
class TraceBatch:
    """What one request held: the kept spans (documents, and their records), how many
    spans it held in all, how many were rejected, and why the first of them was."""

    docs: list[JSON] = field(default_factory=list)
    spans: list[EngineSpan] = field(default_factory=list)
    total: int = 0
    rejected: int = 0
    why: str = ""

    def stored(self) -> JSON:
        """The document `decode` makes the same records from."""
        return {"kind": SPAN_LIST, "items": self.docs}


def decode_traces(body: bytes, content_type: str) -> TraceBatch:
    """An OTLP/HTTP traces body in one of CONTENT_TYPES → its batch; InputError when it is
    not such a request (nothing of it is kept)."""
    batch = TraceBatch()
    if content_type == PROTOBUF:
        for attrs, spans in _protobuf(body):
            for span in spans:
                _one(batch, attrs, span)
    elif content_type == OTLP_JSON:
        for attrs, spans in _json(body):
            for span in spans:
                _one(batch, attrs, span)
    else:
        raise InputError(f"content type {content_type!r}: expected one of {CONTENT_TYPES}")
    return batch


# A span as both encodings give it: name, start and end (ns), trace id and span id (hex).
_Raw = tuple[str, int, int, str, str]


def _one(batch: TraceBatch, attrs: dict[str, str], raw: _Raw) -> None:
    batch.total += 1
    name, start, end, trace_id, span_id = raw
    if name not in SPANS:
        return  # not a start-up step: accepted, not kept
    why = _unusable(attrs, name, start, end)
    if why is not None:
        batch.rejected += 1
        batch.why = batch.why or why
        return
    doc: JSON = {
        "kind": "EngineSpan",
        "namespace": attrs[NAMESPACE],
        "pod": attrs[POD],
        "name": name,
        "start_ns": start,
        "end_ns": end,
        "trace_id": trace_id,
        "span_id": span_id,
    }
    if attrs.get(UID):
        doc["uid"] = attrs[UID]
    batch.docs.append(doc)
    batch.spans.append(engine_span(doc))


def _unusable(attrs: dict[str, str], name: str, start: int, end: int) -> str | None:
    if not attrs.get(NAMESPACE) or not attrs.get(POD):
        return (
            f"span {name!r} has no resource attributes {NAMESPACE} and {POD}: its pod is "
            "unknown (set OTEL_RESOURCE_ATTRIBUTES from the downward API)"
        )
    if start <= 0 or end < start:
        return f"span {name!r} has no start and end after it ({start}, {end})"
    return None


def _protobuf(body: bytes) -> list[tuple[dict[str, str], list[_Raw]]]:
    # Imported here: only this path needs protobuf (replay, the simulator and the steps
    # decode JSON and need not load it).
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise InputError(f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}") from None
    out = []
    for rs in request.resource_spans:
        attrs = {
            kv.key: kv.value.string_value
            for kv in rs.resource.attributes
            if kv.value.WhichOneof("value") == "string_value"
        }
        spans = [
            (
                s.name,
                s.start_time_unix_nano,
                s.end_time_unix_nano,
                s.trace_id.hex(),
                s.span_id.hex(),
            )  # fmt: skip
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        out.append((attrs, spans))
    return out


# ---- OTLP/JSON: the fields read, everything else ignored -----------------------------------
class _Value(msgspec.Struct, rename="camel"):
    string_value: str | None = None


class _KeyValue(msgspec.Struct):
    key: str = ""
    value: _Value | None = None


class _Resource(msgspec.Struct):
    attributes: list[_KeyValue] = []


class _Span(msgspec.Struct, rename="camel"):
    trace_id: str = ""
    span_id: str = ""
    name: str = ""
    start_time_unix_nano: int | str = 0
    end_time_unix_nano: int | str = 0


class _ScopeSpans(msgspec.Struct):
    spans: list[_Span] = []


class _ResourceSpans(msgspec.Struct, rename="camel"):
    resource: _Resource | None = None
    scope_spans: list[_ScopeSpans] = []


class _Request(msgspec.Struct, rename="camel"):
    resource_spans: list[_ResourceSpans] = []


_REQUEST = msgspec.json.Decoder(_Request)


def _json(body: bytes) -> list[tuple[dict[str, str], list[_Raw]]]:
    try:
        request = _REQUEST.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:  # ValidationError is a DecodeError
        raise InputError(f"not an OTLP ExportTraceServiceRequest (JSON): {exc}") from None
    out = []
    for rs in request.resource_spans:
        attrs = {
            kv.key: kv.value.string_value
            for kv in (rs.resource.attributes if rs.resource else [])
            if kv.value is not None and kv.value.string_value is not None
        }
        spans = [
            (
                s.name,
                _nanos(s.start_time_unix_nano),
                _nanos(s.end_time_unix_nano),
                s.trace_id.lower(),
                s.span_id.lower(),
            )  # fmt: skip
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        out.append((attrs, spans))
    return out


def _nanos(value: int | str) -> int:
    """A fixed64 as OTLP/JSON writes it (a decimal string, or a number); out of range or
    not a number → 0 (no time: the span is rejected, not the body)."""
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit():
            return 0
        value = int(value)
    return value if 0 <= value <= _MAX_NS else 0


# ---- the stored document ---------------------------------------------------------------------
def engine_span(doc: JSON) -> EngineSpan:
    """`{"kind": "EngineSpan", "namespace", "pod", "uid"?, "name", "start_ns", "end_ns",
    "trace_id"?, "span_id"?}` → its record."""
    ns, pod, name = doc.get("namespace"), doc.get("pod"), doc.get("name")
    if not all(isinstance(v, str) and v for v in (ns, pod, name)):
        raise InputError("EngineSpan without namespace, pod and name")
    start, end = _ns(doc.get("start_ns")), _ns(doc.get("end_ns"))
    if start is None or end is None or end < start:
        raise InputError("EngineSpan without start_ns and end_ns (integer ns, end ≥ start)")
    uid = doc.get("uid")
    return EngineSpan(
        namespace=str(ns),
        pod=str(pod),
        uid=uid if isinstance(uid, str) and uid else None,
        name=str(name),
        started=start / _NS,
        at=end / _NS,
        trace_id=_text(doc.get("trace_id")),
        span_id=_text(doc.get("span_id")),
    )


def _ns(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_NS
    return value if ok else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
