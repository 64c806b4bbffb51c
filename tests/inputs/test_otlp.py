"""OTLP/HTTP trace bodies → vLLM's start-up spans, by pod: both encodings, built with
opentelemetry-proto's own classes; bad bodies refused whole, unusable spans counted."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.inputs.decode import decode
from remediator.inputs.otlp import OTLP_JSON, PROTOBUF, TraceBatch, decode_traces
from remediator.inputs.records import EngineSpan, EngineStep, InputError
from remediator.inputs.vllm_log import (
    COMPILE_STARTED,
    ENGINE_READY,
    GRAPHS_STARTED,
    KV_CACHE_STARTED,
)
from remediator.inputs.vllm_spans import SPANS, marks
from remediator.timeline.engine_steps import EngineSteps
from tests.inputs.otlp_requests import Process, S, SpanSpec, json_doc, pod_attrs, protobuf

T = 1_764_000_000 * S  # 2025-11-24, in ns
UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def _start() -> list[Process]:
    """One engine core's export: steps, spans vLLM times inside them, and a worker of
    another pod whose resource does not say which pod it is."""
    core = Process(
        pod_attrs("llm", "vllm-0", UID),
        [
            SpanSpec("Init device", T, T + 2 * S),  # not a step: ignored
            SpanSpec("Load model", T + 2 * S, T + 40 * S),
            SpanSpec("Compile graph", T + 48 * S, T + 50 * S),
            SpanSpec("Compile graph", T + 50 * S, T + 60 * S),
            SpanSpec("Capture model", T + 62 * S, T + 99 * S),
        ],
    )
    anonymous = Process({"service.name": "vllm.server", "k8s.pod.name": 7},
                        [SpanSpec("Load model", T, T + S)])  # fmt: skip
    return [core, anonymous]


def _both(processes: list[Process]) -> tuple[TraceBatch, TraceBatch]:
    return (
        decode_traces(protobuf(processes), PROTOBUF),
        decode_traces(orjson.dumps(json_doc(processes)), OTLP_JSON),
    )


def test_start_up_spans_are_kept_by_pod_and_the_rest_counted() -> None:
    for batch in _both(_start()):
        assert [s.name for s in batch.spans] == [
            "Load model", "Compile graph", "Compile graph", "Capture model"
        ]  # fmt: skip
        load = batch.spans[0]
        assert (load.namespace, load.pod, load.uid) == ("llm", "vllm-0", UID)
        assert (load.started, load.at) == (T / S + 2, T / S + 40)
        assert load.trace_id == bytes(range(1, 17)).hex() and load.span_id == "0102030405060708"
        assert (batch.total, batch.rejected) == (6, 1)
        assert "k8s.namespace.name and k8s.pod.name" in batch.why


def test_both_encodings_give_the_same_records_and_json_times_may_be_numbers() -> None:
    proto, text = _both(_start())
    numbers = decode_traces(orjson.dumps(json_doc(_start(), numbers=True)), OTLP_JSON)
    assert proto.spans == text.spans == numbers.spans


def test_what_is_stored_decodes_to_the_same_records() -> None:
    batch = decode_traces(protobuf(_start()), PROTOBUF)
    assert decode(orjson.dumps(batch.stored())) == batch.spans


@pytest.mark.parametrize(
    ("start", "end", "why"),
    [(0, T, "no start"), (T + S, T, "no start and end after it")],
)
def test_a_span_without_its_times_is_rejected_not_the_body(start: int, end: int, why: str) -> None:
    bad = [Process(pod_attrs("llm", "vllm-0"), [SpanSpec("Load model", start, end),
                                                SpanSpec("Capture model", T, T + S)])]  # fmt: skip
    for batch in _both(bad):
        assert [s.name for s in batch.spans] == ["Capture model"]
        assert batch.rejected == 1 and why in batch.why
        assert batch.spans[0].uid is None  # no k8s.pod.uid: found by name


@pytest.mark.parametrize(
    ("body", "ctype", "why"),
    [
        (b"\x0a\x05\x0a\x03\xff\xff", PROTOBUF, "(protobuf)"),
        (b"not json", OTLP_JSON, "(JSON)"),
        (b'{"resourceSpans": {"a": 1}}', OTLP_JSON, "(JSON)"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}', OTLP_JSON,
         "(JSON)"),
        (b"{}", "text/plain", "content type"),
    ],
)  # fmt: skip
def test_a_body_that_is_not_a_request_is_refused_with_a_reason(
    body: bytes, ctype: str, why: str
) -> None:
    with pytest.raises(InputError, match=why.replace("(", r"\(").replace(")", r"\)")):
        decode_traces(body, ctype)


def test_an_empty_request_is_a_request() -> None:
    for body, ctype in ((b"", PROTOBUF), (b"{}", OTLP_JSON)):
        batch = decode_traces(body, ctype)
        assert (batch.spans, batch.total, batch.rejected) == ([], 0, 0)


@given(st.binary(max_size=300), st.sampled_from([PROTOBUF, OTLP_JSON]))
def test_any_bytes_decode_or_are_refused_with_input_error(body: bytes, ctype: str) -> None:
    try:
        batch = decode_traces(body, ctype)
    except InputError as exc:
        assert str(exc)
    else:
        assert batch.total == len(batch.spans) + batch.rejected + _ignored(batch)


def _ignored(batch: TraceBatch) -> int:
    return batch.total - len(batch.spans) - batch.rejected


_NAMES = st.sampled_from([*SPANS, "Init device", "llm_request", "é ☃"])
_NS = st.integers(min_value=0, max_value=2**64 - 1)
_SPANS = st.lists(st.builds(SpanSpec, _NAMES, _NS, _NS), max_size=6)
_ATTRS = st.one_of(
    st.builds(pod_attrs, st.sampled_from(["llm", "ns-2"]), st.text(min_size=1, max_size=8),
              st.one_of(st.none(), st.just(UID))),
    st.just({"service.name": "vllm.server"}),
)  # fmt: skip
_PROCESSES = st.lists(st.builds(Process, _ATTRS, _SPANS), max_size=4)


@given(_PROCESSES)
def test_every_span_is_kept_rejected_or_ignored_and_nothing_kept_is_lost(
    processes: list[Process],
) -> None:
    proto, text = _both(processes)
    assert proto.spans == text.spans and proto.rejected == text.rejected
    total = sum(len(p.spans) for p in processes)
    assert proto.total == total
    wanted = [s for p in processes for s in p.spans if s.name in SPANS]
    assert len(proto.spans) + proto.rejected == len(wanted)
    assert decode(orjson.dumps(proto.stored())) == proto.spans


def test_a_span_marks_where_the_engine_was_and_the_step_it_ended() -> None:
    capture = EngineSpan("llm", "vllm-0", None, "Capture model", 100.0, 137.5)
    assert marks(capture) == [
        EngineStep("llm", "vllm-0", None, GRAPHS_STARTED, None, None, 100.0),
        EngineStep("llm", "vllm-0", None, "cuda_graphs", 37.5, None, 137.5),
    ]
    compile_ = EngineSpan("llm", "vllm-0", None, "Compile graph", 10.0, 12.0)
    assert [(m.step, m.reported_s, m.at) for m in marks(compile_)] == [
        (COMPILE_STARTED, None, 10.0),
        ("torch_compile", None, 12.0),
    ]  # fmt: skip: one graph of many: its time is not the step's
    prepare = EngineSpan("llm", "vllm-0", None, "Prepare model", 41.0, 99.5)
    assert [(m.step, m.at) for m in marks(prepare)] == [(ENGINE_READY, 99.5)]
    assert marks(EngineSpan("llm", "vllm-0", None, "Init device", 0.0, 1.0)) == []


def test_the_kv_cache_and_warm_up_spans_of_newer_releases_end_their_steps() -> None:
    """vLLM 0.27 to 0.34 (the worker's `@instrument` spans, gpu_worker.py): `Allocate KV
    cache` runs from the cache sized to the cache allocated, `Warmup (GPU)` (`Compile/warmup`
    before) from there to graphs and warm-up done. The V2 model runner, the only GPU runner
    in 0.34, has no `Capture model`: these spans alone give every step."""
    kv = EngineSpan("llm", "vllm-0", None, "Allocate KV cache", 50.0, 53.0)
    assert [(m.step, m.at) for m in marks(kv)] == [(KV_CACHE_STARTED, 50.0), (GRAPHS_STARTED, 53.0)]
    warm = EngineSpan("llm", "vllm-0", None, "Warmup (GPU)", 53.0, 80.0)
    assert [(m.step, m.at) for m in marks(warm)] == [(GRAPHS_STARTED, 53.0), (ENGINE_READY, 80.0)]
    steps = EngineSteps()
    for name, began, ended in (
        ("Load model", 5.0, 20.0),
        ("Compile graph", 21.0, 30.0),
        ("Compile graph", 31.0, 44.0),
        ("Allocate KV cache", 50.0, 53.0),
        ("Warmup (GPU)", 53.0, 80.0),
        ("Prepare model", 46.0, 81.0),
    ):
        for mark in marks(EngineSpan("llm", "vllm-0", None, name, began, ended)):
            steps.see(mark)
    assert steps.durations(0.0, None) == {
        "weights": 20.0,
        "torch_compile": 24.0,
        "memory_profiling": 6.0,
        "kv_cache": 3.0,
        "cuda_graphs": 28.0,
    }


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": "EngineSpan", "namespace": "llm", "pod": "p", "name": "Load model"},
        {"kind": "EngineSpan", "namespace": "llm", "pod": "p", "name": "Load model",
         "start_ns": 5, "end_ns": 4},
        {"kind": "EngineSpan", "namespace": "llm", "pod": "p", "name": "Load model",
         "start_ns": True, "end_ns": 4},
        {"kind": "EngineSpan", "pod": "p", "name": "Load model", "start_ns": 1, "end_ns": 4},
    ],
)  # fmt: skip
def test_a_bad_engine_span_document_is_refused(doc: dict[str, object]) -> None:
    with pytest.raises(InputError, match="EngineSpan without"):
        decode(orjson.dumps(doc))


def test_the_readme_example_is_an_engine_s_first_spans() -> None:
    body = Path(__file__).resolve().parents[2] / "examples" / "vllm-startup-spans.json"
    batch = decode_traces(body.read_bytes(), OTLP_JSON)
    assert [s.name for s in batch.spans] == ["Load model", "Compile graph", "Compile graph"]
    assert (batch.total, batch.rejected) == (4, 0)
    assert {s.pod for s in batch.spans} == {"vllm-llama-70b-7c9d5b6f4-x2k8q"}
