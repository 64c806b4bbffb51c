"""OTLP trace requests for tests, built with opentelemetry-proto's own classes, and the same
request in OTLP/JSON as the spec writes it (hex ids, 64-bit integers as decimal strings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

S = 1_000_000_000  # ns per s


@dataclass(frozen=True)
class SpanSpec:
    name: str
    start_ns: int
    end_ns: int
    trace_id: bytes = bytes(range(1, 17))
    span_id: bytes = bytes(range(1, 9))


@dataclass(frozen=True)
class Process:
    """One exporting process: its resource's attributes (strings, or an int to show that
    only string values name a pod) and its spans."""

    attrs: dict[str, str | int]
    spans: list[SpanSpec] = field(default_factory=list)


def pod_attrs(namespace: str, pod: str, uid: str | None = None) -> dict[str, str | int]:
    attrs: dict[str, str | int] = {
        "service.name": "vllm.server",
        "k8s.namespace.name": namespace,
        "k8s.pod.name": pod,
        "vllm.process_kind": "EngineCore",  # what vLLM's own resource adds
    }
    if uid:
        attrs["k8s.pod.uid"] = uid
    return attrs


def _value(v: str | int) -> AnyValue:
    return AnyValue(string_value=v) if isinstance(v, str) else AnyValue(int_value=v)


def request(processes: list[Process]) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    for p in processes:
        attrs = [KeyValue(key=k, value=_value(v)) for k, v in p.attrs.items()]
        spans = [
            Span(
                name=s.name,
                start_time_unix_nano=s.start_ns,
                end_time_unix_nano=s.end_ns,
                trace_id=s.trace_id,
                span_id=s.span_id,
                kind=Span.SPAN_KIND_INTERNAL,
            )  # fmt: skip
            for s in p.spans
        ]
        scope = ScopeSpans(spans=spans)
        scope.scope.name = "vllm.v1.worker.gpu_worker"
        req.resource_spans.append(
            ResourceSpans(resource=Resource(attributes=attrs), scope_spans=[scope])
        )
    return req


def protobuf(processes: list[Process]) -> bytes:
    return request(processes).SerializeToString()


def _json_value(v: str | int) -> dict[str, Any]:
    return {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}


def json_doc(processes: list[Process], numbers: bool = False) -> dict[str, Any]:
    """OTLP/JSON; `numbers`: times as JSON numbers (receivers take both)."""

    def t(ns: int) -> int | str:
        return ns if numbers else str(ns)

    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": k, "value": _json_value(v)} for k, v in p.attrs.items()]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "vllm.v1.worker.gpu_worker"},
                        "spans": [
                            {
                                "traceId": s.trace_id.hex().upper(),
                                "spanId": s.span_id.hex(),
                                "name": s.name,
                                "kind": 1,
                                "startTimeUnixNano": t(s.start_ns),
                                "endTimeUnixNano": t(s.end_ns),
                                "attributes": [
                                    {"key": "code.function", "value": {"stringValue": "f"}}
                                ],
                                "status": {},
                                "unknownField": [1, 2],
                            }
                            for s in p.spans
                        ],
                    }
                ],
            }
            for p in processes
        ]
    }
