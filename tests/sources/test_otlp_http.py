"""POST /v1/traces on the real aiohttp server (127.0.0.1:0): vLLM's start-up spans sent by the
real OpenTelemetry SDK and its OTLP/HTTP exporter (the one vLLM uses), and by hand in both
encodings, with every answer the OTLP spec asks for."""

from __future__ import annotations

import asyncio
import gzip
from dataclasses import replace
from pathlib import Path

import aiohttp
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from remediator.runtime.service import Service, ServiceConfig
from tests.inputs.otlp_requests import Process, S, SpanSpec, json_doc, pod_attrs, protobuf
from tests.runtime.conftest import NS, WEBHOOK_TOKEN, running, wait_until

AUTH = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
UID = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d"
POD = "vllm-llama-70b-7c9d5b6f4-otlp"
T = 1_764_000_000 * S


def vllm_spans() -> tuple[ReadableSpan, ...]:
    """Spans as vLLM's tracer makes them (vllm/tracing: the resource it creates, with the pod
    from OTEL_RESOURCE_ATTRIBUTES), kept in memory to be exported by the test."""
    resource = Resource.create({"vllm.process_kind": "EngineCore", "k8s.namespace.name": NS,
                                "k8s.pod.name": POD, "k8s.pod.uid": UID})  # fmt: skip
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("vllm.model_executor.model_loader.base_loader")
    for name, start, end in (("Init device", 0, 2), ("Load model", 2, 40),
                             ("Compile graph", 48, 60)):  # fmt: skip
        span = tracer.start_span(name, start_time=T + start * S,
                                 attributes={"code.function": "load_model"})  # fmt: skip
        span.end(end_time=T + end * S)
    return kept.get_finished_spans()


def export(service: Service, token: str, compression: Compression) -> SpanExportResult:
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{service.port}/v1/traces",
        headers={"Authorization": f"Bearer {token}"},
        compression=compression,
        timeout=10,
    )
    try:
        return exporter.export(vllm_spans())
    finally:
        exporter.shutdown()


def steps_of(service: Service) -> dict[str, list[float]]:
    t = service.session.tracker.by_uid.get(UID)
    return dict(t.engine.seen) if t is not None and t.engine is not None else {}


def spans_total(service: Service, outcome: str) -> float:
    value = service.registry.get_sample_value("remediator_otlp_spans_total", {"outcome": outcome})
    return value or 0.0


@pytest.mark.parametrize("compression", [Compression.Gzip, Compression.NoCompression])
async def test_the_real_exporter_delivers_vllm_start_up_spans_to_their_pod(
    service: Service, compression: Compression
) -> None:
    result = await asyncio.to_thread(export, service, WEBHOOK_TOKEN, compression)
    assert result is SpanExportResult.SUCCESS
    await wait_until(lambda: "torch_compile" in steps_of(service))
    steps = steps_of(service)
    assert steps["weights"] == [T / S + 40] and steps["torch_compile"] == [T / S + 60]
    assert (spans_total(service, "kept"), spans_total(service, "ignored")) == (2.0, 1.0)


async def test_the_real_exporter_with_a_wrong_token_fails_and_nothing_is_applied(
    service: Service,
) -> None:
    result = await asyncio.to_thread(export, service, "not-the-token", Compression.Gzip)
    assert result is SpanExportResult.FAILURE
    assert steps_of(service) == {}


def _request(attrs: bool = True) -> list[Process]:
    who = pod_attrs(NS, POD, UID) if attrs else {"service.name": "vllm.server"}
    return [Process(who, [SpanSpec("Capture model", T + 62 * S, T + 99 * S)])]


async def test_otlp_json_is_answered_in_json(http: aiohttp.ClientSession, service: Service) -> None:
    headers = {**AUTH, "Content-Type": "application/json"}
    body = orjson.dumps(json_doc(_request()))
    async with http.post("/v1/traces", data=body, headers=headers) as resp:
        assert resp.status == 200 and resp.content_type == "application/json"
        assert await resp.json() == {}
    await wait_until(lambda: "cuda_graphs" in steps_of(service))


async def test_spans_without_their_pod_are_a_partial_success_in_both_encodings(
    http: aiohttp.ClientSession, service: Service
) -> None:
    headers = {**AUTH, "Content-Type": "application/x-protobuf"}
    async with http.post("/v1/traces", data=protobuf(_request(False)), headers=headers) as resp:
        assert resp.status == 200
        answer = ExportTraceServiceResponse.FromString(await resp.read())
        assert answer.partial_success.rejected_spans == 1
        assert "k8s.pod.name" in answer.partial_success.error_message
    headers = {**AUTH, "Content-Type": "application/json"}
    body = orjson.dumps(json_doc(_request(False)))
    async with http.post("/v1/traces", data=body, headers=headers) as resp:
        partial = (await resp.json())["partialSuccess"]
        assert partial["rejectedSpans"] == "1" and "k8s.pod.name" in partial["errorMessage"]
    assert spans_total(service, "rejected") == 2.0 and steps_of(service) == {}


@pytest.mark.parametrize(
    ("ctype", "encoding", "body", "status", "why"),
    [
        ("application/x-protobuf", "", b"\x0a\x05\x0a\x03\xff\xff", 400, "protobuf"),
        ("application/json", "", b"{", 400, "JSON"),
        ("application/x-protobuf", "gzip", b"not gzip", 400, "unreadable"),
        ("text/plain", "", b"{}", 415, "Content-Type"),
        ("application/json", "snappy", b"{}", 415, "Content-Encoding"),
    ],
)
async def test_bad_requests_get_a_status_in_their_encoding(
    http: aiohttp.ClientSession,
    service: Service,
    ctype: str,
    encoding: str,
    body: bytes,
    status: int,
    why: str,
) -> None:
    headers = {**AUTH, "Content-Type": ctype}
    if encoding:
        headers["Content-Encoding"] = encoding
    async with http.post("/v1/traces", data=body, headers=headers) as resp:
        assert resp.status == status
        raw = await resp.read()
    if ctype == "application/x-protobuf":  # google.rpc.Status: code 3, then the message
        assert raw[:2] == b"\x08\x03" and raw[2] == 0x12 and why.encode() in raw
    else:
        doc = orjson.loads(raw)
        assert doc["code"] == 3 and why in doc["message"]


async def test_gzip_json_and_no_token_is_401(http: aiohttp.ClientSession, service: Service) -> None:
    body = gzip.compress(orjson.dumps(json_doc(_request())))
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    async with http.post("/v1/traces", data=body, headers=headers) as resp:
        assert resp.status == 401 and (await resp.json())["code"] == 16
    async with http.post("/v1/traces", data=body, headers={**headers, **AUTH}) as resp:
        assert resp.status == 200
    await wait_until(lambda: "cuda_graphs" in steps_of(service))


async def test_kept_spans_are_fed_again_after_a_restart(config: ServiceConfig) -> None:
    """Stored before the answer, as /events' inputs: a new process has them again."""
    cfg = replace(config, watch=False)
    headers = {**AUTH, "Content-Type": "application/x-protobuf"}
    async with running(cfg) as first, aiohttp.ClientSession() as client:
        url = f"http://127.0.0.1:{first.port}/v1/traces"
        async with client.post(url, data=protobuf(_request()), headers=headers) as r:
            assert r.status == 200
    async with running(cfg) as second:
        await wait_until(lambda: "cuda_graphs" in steps_of(second))


async def test_no_token_to_compare_with_is_a_retryable_503(
    config: ServiceConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token file emptied mid-run: nobody can be admitted; the exporter is told to
    retry (503, Retry-After, google.rpc UNAVAILABLE), and nothing is taken."""
    token = tmp_path / "webhook-token"
    token.write_text(WEBHOOK_TOKEN + "\n")
    monkeypatch.delenv("REMEDIATOR_WEBHOOK_TOKEN", raising=False)
    monkeypatch.setenv("REMEDIATOR_WEBHOOK_TOKEN_FILE", str(token))
    headers = {**AUTH, "Content-Type": "application/x-protobuf"}
    async with running(replace(config, watch=False)) as svc, aiohttp.ClientSession() as client:
        token.write_text("\n")
        url = f"http://127.0.0.1:{svc.port}/v1/traces"
        async with client.post(url, data=protobuf(_request()), headers=headers) as r:
            assert r.status == 503 and r.headers["Retry-After"] == "1"
            raw = await r.read()
        assert raw[:2] == b"\x08\x0e" and b"webhook token unavailable" in raw
        assert steps_of(svc) == {}
