"""The wordings of vLLM 0.28 to 0.34 that no published log in tests/data/vllm_logs shows yet,
each built from the release's own format string (the source file and line are named), and
the two real logs that do show the compile-range wording."""

from __future__ import annotations

import pytest

from remediator.inputs.vllm_log import (
    COMPILE_MISSED,
    COMPILE_STARTED,
    GRAPH_MEMORY,
    KV_CACHE_EXTENDED,
    KV_CACHE_STARTED,
    WEIGHTS_STARTED,
    StepMark,
    parse_line,
)
from tests.data import vllm_logs

PREFIX = "(EngineCore pid=1) INFO 12-01 10:00:00 "


def test_a_compile_that_missed_its_cache_in_the_compile_range_wording() -> None:
    """From 0.12 a miss says "for compile range (1, 2048)" where it said "for general shape"
    (compilation/backends.py); the "Cache the graph" line comes only with the compile cache."""
    for name in (
        "2026-09-v0.29-windows-v2-runner-compile-range.log",
        "2026-05-v0.2x-tp2-eagle-compile-range.log",
    ):
        line = next(ln for ln in vllm_logs.lines(name) if "compile range" in ln)
        assert parse_line(line) == StepMark(COMPILE_MISSED), line
    tagged = "[backends.py:406] [backbone] Cache the graph of compile range (1, 8192) for later use"
    assert parse_line(PREFIX + tagged) == StepMark(COMPILE_MISSED)
    assert parse_line(PREFIX + "Directly load the compiled graph(s) for compile range") is None


@pytest.mark.parametrize(
    ("line", "mark"),
    [
        # v1/worker/gpu/model_runner.py:412 (0.34; :382 in 0.29): the V2 runner's only line
        # before the weights load ("Starting to load model" is gone from 0.34)
        ("[model_runner.py:412] Loading model from scratch...", StepMark(WEIGHTS_STARTED)),
        # compilation/monitor.py:40 (0.32 on): tagged by the part compiled
        ("[monitor.py:40] [backbone] Starting torch.compile", StepMark(COMPILE_STARTED)),
        (
            "[monitor.py:61] [eagle_head] torch.compile took 9.14 s in total",
            StepMark("torch_compile", 9.14),
        ),
        (
            "[monitor.py:92] [backbone] Initial profiling/warmup run took 1.23 s",
            StepMark("memory_profiling", 1.23),
        ),
        # compilation/decorators.py:716 (0.19 on, without the ahead-of-time compile)
        (
            "[monitor.py:61] [backbone] torch.compile and initial profiling/warmup run "
            "together took 60.12 s in total",
            StepMark("torch_compile", 60.12),
        ),
        # v1/core/kv_cache_utils.py:1169 (0.30 on): the device's name, not always "GPU"
        (
            "[kv_cache_utils.py:1169] XPU KV cache size: 1,234,560 tokens, Maximum concurrency "
            "for 4,096 tokens per request: 301.41x",
            StepMark(KV_CACHE_STARTED, None, "1,234,560 tokens"),
        ),
        (
            "[kv_cache_utils.py:1169] GPU + host KV cache size: 98,304 tokens, Maximum "
            "concurrency for 8,192 tokens per request: 12.00x",
            StepMark(KV_CACHE_STARTED, None, "98,304 tokens"),
        ),
    ],
)
def test_the_newer_wordings(line: str, mark: StepMark) -> None:
    assert parse_line(PREFIX + line) == mark


def test_the_extensible_cache_says_it_grew_the_cache() -> None:
    """v1/worker/extensible_kv_cache.py (0.34), between capture and the engine's end: the
    cache grown (or shrunk) to its final size is a mark; the memory measured is not."""
    for line in (
        "[extensible_kv_cache.py:537] Extended KV cache to 12345 blocks (10.00 GiB).",
        "[extensible_kv_cache.py] Remapping the KV cache from 12400 to 12345 blocks to fit "
        "the measured budget.",
    ):
        assert parse_line(PREFIX + line) == StepMark(KV_CACHE_EXTENDED), line
    measured = (
        "[extensible_kv_cache.py:694] Memory after warmup: 3.10 GiB free, 0.02 GiB committed "
        "to the KV cache, 1.20 GiB kept for transient activations"
    )
    assert parse_line(PREFIX + measured) is None


def test_the_graphs_measured_while_profiling_memory_are_a_mark() -> None:
    """v1/worker/gpu_model_runner.py (0.18 on): before the KV cache is sized."""
    for line in (
        "[gpu_model_runner.py:5651] Estimated CUDA graph memory: 0.26 GiB total",
        "[gpu_model_runner.py:6021] Profiling CUDA graph memory: PIECEWISE=1 (largest=6), "
        "FULL=1 (largest=6)",
    ):
        assert parse_line(PREFIX + line) == StepMark(GRAPH_MEMORY), line
    enabled = "[gpu_worker.py:578] CUDA graph memory profiling is enabled (default since v0.21.0)."
    assert parse_line(PREFIX + enabled) is None


def test_a_kv_cache_size_given_by_the_user_ends_memory_profiling() -> None:
    """With --kv-cache-memory-bytes (or 0.34's persisted startup plan) V1 skips memory
    profiling and says so instead of "Available KV cache memory" (v1/worker/gpu_worker.py).
    The line as published in github.com/ritikraj7/cpu-centric-agentic-ai,
    mini-swe-agent/README.md (vLLM on Intel XPU, 2026-09), cut after its first sentence."""
    line = (
        "(EngineCore pid=2122) INFO 09-19 12:40:21 [gpu_worker.py:381] Initial free memory "
        "10.18 GiB, reserved 0.73 GiB memory for KV Cache as specified by kv_cache_memory_bytes "
        "config and skipped memory profiling."
    )
    assert parse_line(line) == StepMark("memory_profiling", None, "0.73 GiB for KV cache")
