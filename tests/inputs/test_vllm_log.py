"""vLLM start-up lines from several releases → the step each one ends; all others ignored."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.inputs.decode import decode
from remediator.inputs.records import EngineStep, InputError
from remediator.inputs.vllm_log import (
    ENGINE_READY,
    ENGINE_STARTED,
    GRAPHS_STARTED,
    KV_CACHE_STARTED,
    MARKS,
    StepMark,
    is_reprint,
    parse_line,
    vllm_clock,
)
from tests.data import vllm_logs

# Every real file in tests/data/vllm_logs is checked line by line in test_vllm_logs_table.py.


def _line(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


def test_the_compile_total_in_every_wording() -> None:
    """0.6.5 said "graph compilation takes", 0.7 to 0.11 "torch.compile takes", later "took"."""
    for name, seconds in (
        ("2024-12-v0.6.5-graph-compilation.log", 14.73),
        ("2025-11-v1-engine.log", 19.69),
        ("2026-08-v0.2x-xpu-took-crash.log", 0.06),
    ):
        line = _line(name, "in total")
        assert parse_line(line) == StepMark("torch_compile", seconds), line


def test_the_engine_banner_says_the_engine_began_its_init() -> None:
    """Printed before the workers start and NCCL comes up (the stretch before the first step):
    V0 "an LLM engine" (0.4 here), "a V0 LLM engine" (0.8), V1 "a V1 LLM engine"; the V1 and
    0.8 forms are vLLM's own format strings (engine/llm_engine.py, v1/engine/core.py)."""
    line = _line("2024-05-v0.4.2-kv-cache.log", "Initializing")
    assert parse_line(line) == StepMark(ENGINE_STARTED)
    for form in (
        "INFO 03-20 10:01:02 [llm_engine.py:243] Initializing a V0 LLM engine (v0.8.1) with "
        "config: model='Qwen/Qwen2.5-7B-Instruct', speculative_config=None",
        "(EngineCore_DP0 pid=312) INFO 11-24 11:43:20 [core.py:93] Initializing a V1 LLM engine "
        "(v0.11.2) with config: model='Qwen/Qwen3-0.6B', speculative_config=None",
    ):
        assert parse_line(form) == StepMark(ENGINE_STARTED), form
    assert parse_line("INFO: Initializing an LLM engine cache warmer") is None


def test_memory_profiling_in_every_wording() -> None:
    assert parse_line(_line("2024-11-v0.6.5-memory-profiling-took.log", "took")) == StepMark(
        "memory_profiling", 1.16
    )
    assert parse_line(_line("2025-03-v0-profiling.log", "Memory profiling")) == StepMark(
        "memory_profiling", 34.26
    )
    line = _line("2026-08-v0.2x-xpu-took-crash.log", "Initial profiling")
    assert parse_line(line) == StepMark("memory_profiling", 0.0)


def test_a_negative_figure_is_read_with_its_sign() -> None:
    """A worker with no room left for a KV cache says so with a negative figure."""
    line = _line("2025-12-v1-tp2-negative-kv.log", "-3.86")
    assert parse_line(line) == StepMark("memory_profiling", None, "-3.86 GiB for KV cache")


def test_the_engines_init_line_ends_engine_init_in_every_wording() -> None:
    """With --enforce-eager no graph is captured: this line is the last one engine init has."""
    for name in (
        "2026-02-v1-eager-omni.log",
        "2026-02-v0-memory-profiling-init-engine.log",
        "2026-05-v1-init-compilation.log",  # "took 163.91 s (compilation: 54.58 s)"
    ):
        assert parse_line(_line(name, "init engine")) == StepMark(ENGINE_READY), name


def test_the_kv_cache_starts_where_it_is_sized_and_ends_where_capture_starts() -> None:
    """ "# GPU blocks" and "GPU KV cache size" are printed as the cache is allocated: they end
    memory profiling, not the KV cache. V0's capture line says the cache is allocated."""
    blocks = parse_line(_line("2025-04-v0.6-graph-capture.log", "# GPU blocks"))
    assert blocks == StepMark(KV_CACHE_STARTED, None, "4109 GPU blocks")
    tokens = parse_line(_line("2025-11-v1-engine.log", "GPU KV cache size"))
    assert tokens == StepMark(KV_CACHE_STARTED, None, "1,587,648 tokens")
    for name, needle in (
        ("2025-04-v0.6-graph-capture.log", "Capturing the model"),  # ≤0.6.1
        ("2024-12-v0-graph-capture.log", "Capturing cudagraphs"),  # 0.6.5 on
    ):
        assert parse_line(_line(name, needle)) == StepMark(GRAPHS_STARTED), name
    assert (
        parse_line("Capturing CUDA graph shapes: 100%|##| 35/35 [00:13<00:00,  2.51it/s]") is None
    )


def test_a_ray_reprint_is_told_and_keeps_the_time_vllm_wrote() -> None:
    line = _line("2024-12-v0.6-ray-reprint.log", "repeated 3x")
    at = datetime(2024, 12, 15, 7, 52, 0, tzinfo=UTC).timestamp()
    assert is_reprint(line) and parse_line(line) == StepMark("weights", None, "3.8761 GB")
    assert vllm_clock(line, at) == datetime(2024, 12, 15, 7, 41, 22, tzinfo=UTC).timestamp()
    assert not is_reprint(_line("2024-12-v0.6-ray-reprint.log", "# GPU blocks"))


def test_vllms_clock_has_no_year_so_it_is_the_years_of_the_kubelets() -> None:
    line = "INFO 12-31 23:59:58 model_runner.py:1008] Loading model weights took 7.5122 GB"
    new_year = datetime(2026, 1, 1, 0, 0, 3, tzinfo=UTC).timestamp()
    assert vllm_clock(line, new_year) == datetime(2025, 12, 31, 23, 59, 58, tzinfo=UTC).timestamp()
    leap = "INFO 02-29 10:00:00 worker.py:267] Memory profiling takes 1.00 seconds"
    assert vllm_clock(leap, datetime(2025, 3, 1, tzinfo=UTC).timestamp()) is None
    assert vllm_clock("Memory profiling takes 1.00 seconds", new_year) is None


def test_uvicorn_startup_complete_ends_the_api_server_step() -> None:
    assert parse_line("INFO:     Application startup complete.") == StepMark("api_server")
    assert parse_line("INFO:     Waiting for application startup.") is None


def test_lines_that_look_alike_mark_nothing() -> None:
    for line in (
        "(EngineCore_0 pid=1) INFO 10-26 21:47:45 [default_loader.py:267] "
        "Loading weights took 1.27 seconds",
        "",
        "took takes blocks: finished in",
    ):
        assert parse_line(line) is None, line


@given(st.text(max_size=300), st.floats(min_value=0, max_value=4e9))
def test_any_text_parses_or_is_ignored(text: str, at: float) -> None:
    mark = parse_line(text)
    assert mark is None or mark.step in MARKS
    logged = vllm_clock(text, at)
    assert logged is None or logged <= at + 86400.0
    assert isinstance(is_reprint(text), bool)


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
