"""vLLM start-up lines from several releases → the step each one ends; all others ignored."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.inputs.decode import decode
from remediator.inputs.records import EngineStep, InputError
from remediator.inputs.vllm_log import STEPS, StepMark, parse_line
from tests.data import vllm_logs

# What each real file marks, in file order (read off the lines by hand).
EXPECTED = {
    "2024-08-tp8-weights.log": [("weights", None, "1.5874 GB")] * 3,
    "2024-12-v0-graph-capture.log": [("cuda_graphs", 14.0, "0.21 GiB")],
    "2025-03-v0-profiling.log": [
        ("torch_compile", 28.77, None),
        ("memory_profiling", 34.26, None),
        ("kv_cache", None, "7191 GPU blocks"),
    ],
    "2025-04-kubelet-timestamps.log": [],
    "2025-04-uvicorn.log": [],
    "2025-06-v1-api-server.log": [
        ("torch_compile", 45.81, None),
        ("kv_cache", None, "1,131,008 tokens"),
        ("cuda_graphs", 37.0, "0.45 GiB"),
        ("api_server_started", None, "http://0.0.0.0:8000"),
    ],
    "2025-09-tp4-graphs.log": [("cuda_graphs", 38.0, "1.64 GiB")],
    "2025-10-v1-engine.log": [
        ("weights", 2.195456, "7.6785 GiB"),
        ("torch_compile_started", None, None),
        ("torch_compile_started", None, None),
        ("torch_compile", 3.7, None),
        ("memory_profiling", None, "18.38 GiB for KV cache"),
        ("kv_cache", None, "425,424 tokens"),
        ("cuda_graphs", 7.0, "0.95 GiB"),
    ],
    "2025-11-v1-engine.log": [
        ("weights", 27.200487, "2.0513 GiB"),
        ("torch_compile_started", None, None),
        ("torch_compile_started", None, None),
        ("torch_compile", 19.69, None),
        ("memory_profiling", None, "33.31 GiB for KV cache"),
        ("kv_cache", None, "1,587,648 tokens"),
    ],
    "2026-05-server.log": [("api_server_started", None, "http://0.0.0.0:8000")],
}


def test_every_data_file_is_checked() -> None:
    assert sorted(EXPECTED) == vllm_logs.files()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_lines_mark_their_steps(name: str) -> None:
    marks = [m for m in map(parse_line, vllm_logs.lines(name)) if m is not None]
    assert [(m.step, m.reported_s, m.detail) for m in marks] == EXPECTED[name]


def test_uvicorn_startup_complete_ends_the_api_server_step() -> None:
    assert parse_line("INFO:     Application startup complete.") == StepMark("api_server")
    assert parse_line("INFO:     Waiting for application startup.") is None


def test_lines_that_look_alike_mark_nothing() -> None:
    for line in (
        "(EngineCore_0 pid=1) INFO 10-26 21:47:45 [default_loader.py:267] "
        "Loading weights took 1.27 seconds",
        "INFO 06-02 11:03:11 [backends.py:170] Compiling a graph for general shape takes 36.76 s",
        "INFO 06-02 11:03:55 [core.py:167] "
        "init engine (profile, create kv cache, warmup model) took 90.84 seconds",
        "",
        "took takes blocks: finished in",
    ):
        assert parse_line(line) is None, line


@given(st.text(max_size=300))
def test_any_text_parses_or_is_ignored(text: str) -> None:
    mark = parse_line(text)
    assert mark is None or mark.step in (*STEPS, "torch_compile_started", "api_server_started")


def test_engine_log_input_with_the_kubelet_prefix() -> None:
    (line,) = vllm_logs.lines("2025-06-v1-api-server.log")[4:5]
    doc = {
        "kind": "EngineLog",
        "namespace": "llm",
        "pod": "p",
        "line": "2025-06-02T11:03:55.5Z " + line,
    }
    (item,) = decode(orjson.dumps(doc))
    assert isinstance(item, EngineStep) and item.step == "cuda_graphs"
    assert item.at == 1748862235.5 and item.reported_s == 37.0 and item.uid is None


def test_engine_log_lines_that_mark_nothing_are_no_input() -> None:
    doc = vllm_logs.engine_log(
        "llm", "p", "INFO 06-02 11:03:56 [launcher.py:28] Available routes are:", 0.0
    )
    assert decode(orjson.dumps(doc)) == []


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        (
            {"kind": "EngineLog", "pod": "p", "time": "2025-06-02T11:03:55Z", "line": "x"},
            "namespace",
        ),
        (
            {"kind": "EngineLog", "namespace": "llm", "pod": "p", "time": "2025-06-02T11:03:55Z"},
            "line",
        ),
        (
            {"kind": "EngineLog", "namespace": "llm", "pod": "p", "line": "no time here"},
            "malformed",
        ),
        ({"kind": "EngineLog", "namespace": "llm", "pod": "p", "time": 5, "line": "x"}, "time"),
    ],
)
def test_bad_engine_log_inputs_are_refused_with_a_reason(doc: dict[str, object], why: str) -> None:
    with pytest.raises(InputError, match=why):
        decode(orjson.dumps(doc))
