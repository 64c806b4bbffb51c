"""Where the engine is, and how long each step took, on real lines that releases word or order
differently: eager starts, the KV cache's start, Ray's late reprints, a compile just begun."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.records import EngineStep
from remediator.timeline.engine_steps import EngineSteps
from tests.data import vllm_logs


def _steps(docs: list[dict[str, object]]) -> EngineSteps:
    steps = EngineSteps()
    for doc in docs:
        for item in decode(orjson.dumps(doc)):
            assert isinstance(item, EngineStep)
            steps.see(item)
    return steps


def _upto(name: str, needle: str) -> list[dict[str, object]]:
    """The file's lines as delivered, through the first line that holds `needle`."""
    docs = vllm_logs.replay(name)
    end = next(i for i, doc in enumerate(docs) if needle in str(doc["line"]))
    return docs[: end + 1]


def _kubelet(stamp: str, line: str) -> dict[str, object]:
    return {"kind": "EngineLog", "namespace": "llm", "pod": "p", "line": f"{stamp} {line}"}


def _t(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


def test_an_eager_start_ends_engine_init_with_the_engines_init_line() -> None:
    """--enforce-eager captures no graphs: after `init engine ... took` the API server starts."""
    before = _steps(_upto("2026-02-v1-eager-omni.log", "Autotuning process ends"))
    assert before.current(None) == "kv_cache"
    steps = _steps(vllm_logs.replay("2026-02-v1-eager-omni.log"))
    assert steps.current(None) == "api_server"
    assert steps.durations(None, None) == {"cuda_graphs": 1.0}  # allocation and warm-up


def test_a_crash_as_the_kv_cache_is_allocated_is_the_kv_caches() -> None:
    """V0 prints "# cuda blocks" as it allocates the cache, V1 "GPU KV cache size" before it
    does: an engine that dies or hangs after either is in kv_cache, not in graph capture."""
    v0 = _steps(_upto("2026-02-v0-memory-profiling-init-engine.log", "# cuda blocks"))
    assert v0.current(None) == "kv_cache"
    v1 = _steps(_upto("2025-11-v1-engine.log", "GPU KV cache size"))
    assert v1.current(None) == "kv_cache"
    capturing = _steps(_upto("2026-02-v0-memory-profiling-init-engine.log", "Capturing"))
    assert capturing.current(None) == "cuda_graphs"
    assert capturing.durations(None, None) == {"memory_profiling": 0.44, "kv_cache": 3.0}


def test_a_worker_with_no_room_for_the_kv_cache_is_the_one_shown() -> None:
    steps = _steps(vllm_logs.replay("2025-12-v1-tp2-negative-kv.log"))
    assert steps.detail == {"memory_profiling": "-3.86 GiB for KV cache"}
    assert steps.current(None) == "kv_cache"


# Real lines from vllm-project/vllm#11208 (Ray, vLLM 0.6): the kubelet's times are made up
# here, as late as Ray's reprints come (9 and 34 minutes late in #6689 and an Ascend log).
_REPRINT = vllm_logs.lines("2024-12-v0.6-ray-reprint.log")[0]  # INFO 12-15 07:41:22 ... [repeated
_BLOCKS = vllm_logs.lines("2024-12-v0.6-ray-reprint.log")[1]  # INFO 12-15 07:41:29 # GPU blocks


def test_a_ray_reprint_that_arrives_late_keeps_the_time_it_was_written() -> None:
    docs = [
        _kubelet("2024-12-15T07:41:29.5Z", _BLOCKS),
        _kubelet("2024-12-15T07:50:40.1Z", _REPRINT),  # after the later line
    ]
    steps = _steps(docs)
    assert steps.end("weights", None, None) == _t(2024, 12, 15, 7, 41, 22)
    assert steps.current(None) == "kv_cache"
    assert steps.durations(None, None) == {"memory_profiling": 7.5}


def test_a_reprint_is_placed_in_the_containers_zone_learnt_from_its_other_lines() -> None:
    """vLLM writes the container's local time; the kubelet, UTC. Here the container is seven
    hours behind UTC, as in vllm-project/vllm#16107's pod."""
    docs = [
        _kubelet("2024-12-15T14:41:29.5Z", _BLOCKS),
        _kubelet("2024-12-15T14:50:40.1Z", _REPRINT),
    ]
    steps = _steps(docs)
    assert steps.end("weights", None, None) == _t(2024, 12, 15, 14, 41, 22)
    assert steps.durations(None, None) == {"memory_profiling": 7.5}
    started = _t(2024, 12, 15, 14, 30, 0)
    alone = _steps(docs[1:])  # no other line yet: UTC is assumed, hours early, so left out
    assert alone.end("weights", started, None) is None
    assert alone.current(started) == "weights"


def test_an_engine_that_only_began_compiling_is_compiling() -> None:
    line = next(ln for ln in vllm_logs.lines("2025-11-v1-engine.log") if "Dynamo" in ln)
    steps = _steps([vllm_logs.engine_log("llm", "p", line, 1000.0)])
    assert steps.current(None) == "torch_compile"
    assert steps.current(999.0) == "torch_compile"


def _lines(*timed: tuple[float, str]) -> list[dict[str, object]]:
    return [vllm_logs.engine_log("llm", "p", line, at) for at, line in timed]


# vLLM 0.29's V2 model runner, compiled, with CUDA graphs (lines from the release's format
# strings: gpu_worker.py profiles the graphs' memory by capturing them once,
# cudagraph_utils.py:792 → model_runner.py:961, before it says the KV cache's memory).
V2_RUNNER_029 = (
    (100.0, "[model_runner.py:382] Loading model from scratch..."),
    (112.0, "[model_runner.py:404] Model loading took 17.7 GiB memory and 12.003756 seconds"),
    (113.0, "[backends.py:1155] Dynamo bytecode transform time: 10.92 s"),
    (140.0, "[monitor.py:53] torch.compile took 27.00 s in total"),
    (142.0, "[monitor.py:81] Initial profiling/warmup run took 1.50 s"),
    (150.0, "[model_runner.py:961] Graph capturing finished in 8 secs, took 0.45 GiB"),
    (151.0, "[gpu_worker.py:626] Available KV cache memory: 20.0 GiB"),
    (152.0, "[kv_cache_utils.py:1168] GPU KV cache size: 1,000,000 tokens, Maximum concurrency"),
    (170.0, "[model_runner.py:961] Graph capturing finished in 17 secs, took 0.45 GiB"),
    (172.0, "[core.py:290] init engine (profile, create kv cache, warmup model) took 60.00 s"),
)


def test_the_graphs_captured_to_profile_memory_are_not_the_capture() -> None:
    """Before the KV cache is sized the engine is still profiling memory, whatever the capture
    line says (it was billed as done, and the engine as starting its API server, then as
    allocating the KV cache)."""
    estimate = _steps(_lines(*V2_RUNNER_029[:6]))
    assert estimate.current(None) == "memory_profiling"
    assert _steps(_lines(*V2_RUNNER_029[:7])).current(None) == "kv_cache"  # sized
    assert "cuda_graphs" not in estimate.durations(None, None)
    steps = _steps(_lines(*V2_RUNNER_029))
    assert steps.durations(100.0, None) == {
        "weights": 12.0,
        "torch_compile": 28.0,
        "memory_profiling": 12.0,
        "cuda_graphs": 20.0,
    }
    assert steps.current(100.0) == "api_server"


# vLLM 0.34 with its extensible KV cache (on by default where it can be): the cache's size is
# said after graph capture and warm-up (kv_cache_planning.py finalize_extensible_kv_cache →
# kv_cache_utils.py:1169), and memory profiling captures nothing.
EXTENSIBLE_034 = (
    (100.0, "[model_runner.py:412] Loading model from scratch..."),
    (112.0, "[model_runner.py:434] Model loading took 17.7 GiB memory and 12.003756 seconds"),
    (113.0, "[monitor.py:40] [backbone] Starting torch.compile"),
    (140.0, "[monitor.py:61] [backbone] torch.compile took 27.00 s in total"),
    (142.0, "[monitor.py:92] [backbone] Initial profiling/warmup run took 1.50 s"),
    (143.0, "[gpu_worker.py:796] Available KV cache memory: 20.0 GiB"),
    (165.0, "[model_runner.py:1217] Graph capturing finished in 20 secs, took 0.45 GiB"),
    (166.0, "[extensible_kv_cache.py:694] Memory after warmup: 3.10 GiB free"),
    (167.0, "[kv_cache_utils.py:1169] GPU KV cache size: 1,000,000 tokens, Maximum concurrency"),
    (168.0, "[extensible_kv_cache.py:537] Extended KV cache to 12345 blocks (10.00 GiB)."),
    (170.0, "[core.py:441] init engine (profile, create kv cache, warmup model) took 70.00 s"),
)


def test_a_kv_cache_sized_after_the_capture_does_not_end_memory_profiling() -> None:
    """0.34 says the cache's size after capturing the graphs: the capture is cuda_graphs',
    not memory profiling's (it was 27 s of profiling and 3 s of graphs)."""
    sizing = _steps(_lines(*EXTENSIBLE_034[:6]))
    assert sizing.current(100.0) == "kv_cache"
    for upto in (9, 10):  # sized again and extended: still in the stretch `init engine` ends
        assert _steps(_lines(*EXTENSIBLE_034[:upto])).current(100.0) == "cuda_graphs"
    # (between the capture line and those lines it logs nothing that says so)
    assert _steps(_lines(*EXTENSIBLE_034[:8])).current(100.0) == "api_server"
    assert _steps(_lines(*EXTENSIBLE_034[:3])).current(100.0) == "torch_compile"
    steps = _steps(_lines(*EXTENSIBLE_034))
    assert steps.durations(100.0, None) == {
        "weights": 12.0,
        "torch_compile": 28.0,
        "memory_profiling": 3.0,
        "cuda_graphs": 27.0,
    }
    assert steps.current(100.0) == "api_server"
    assert steps.detail["kv_cache"] == "1,000,000 tokens"


@pytest.mark.parametrize("lines", [V2_RUNNER_029, EXTENSIBLE_034])
def test_the_newer_orders_give_the_same_steps_in_any_order(
    lines: tuple[tuple[float, str], ...],
) -> None:
    want = _steps(_lines(*lines)).durations(100.0, None)
    for seed in range(10):
        shuffled = list(lines)
        random.Random(seed).shuffle(shuffled)
        assert _steps(_lines(*shuffled)).durations(100.0, None) == want
