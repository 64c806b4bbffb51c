"""stall_of: which stretch a pod's engine is in, and which siblings' times judge it. Real vLLM
lines (tests/data/vllm_logs) at made-up times on one pod; the siblings' times are given."""

from __future__ import annotations

import orjson
import pytest

from remediator.policy.config import ProgressConfig
from remediator.policy.history import PhaseHistory, few_samples_margin, step_key
from remediator.policy.stall import stall_of
from remediator.timeline import timelines_from
from remediator.timeline.model import PodTimeline
from tests.data import vllm_logs
from tests.timeline.streams import MODEL, NS, POD, T0, UID, pod, watch

STARTED = 100.0
ON = ProgressConfig(enabled=True, factor=3.0, floor_s=120.0)  # the figures these tests use


def _line(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


def _pod(lines: list[tuple[float, str]]) -> PodTimeline:
    docs = [watch(pod(created=0, scheduled=10, started=STARTED), "ADDED")]
    base = T0.timestamp()
    docs += [vllm_logs.engine_log(NS, POD, line, base + at) for at, line in lines]
    t = timelines_from([orjson.dumps(d) for d in docs]).get(UID)
    assert t is not None
    return t


def _history(**steps: float) -> PhaseHistory:
    history = PhaseHistory(50)
    for step, seconds in steps.items():
        for _ in range(5):
            history.add(MODEL, step_key(step), seconds)
    return history


V0_WEIGHTS = _line("2024-05-v0.4.2-kv-cache.log", "Loading model weights took")
V0_BLOCKS = _line("2024-05-v0.4.2-kv-cache.log", "# GPU blocks")
COMPLETE = "INFO:     Application startup complete."


def test_a_v0_engine_after_its_weights_is_timed_by_memory_profiling() -> None:
    """A V0 engine compiles nothing: its siblings have no torch_compile times."""
    t = _pod([(STARTED + 30, V0_WEIGHTS)])
    stall = stall_of(t, ON, _history(weights=30, memory_profiling=50, kv_cache=2))
    assert stall is not None
    assert (stall.step, stall.timed_as) == ("memory_profiling", "memory_profiling")
    assert stall.began == T0.timestamp() + STARTED + 30
    # 3x the siblings' 50 s, widened for five of them (few_samples_margin: 1.54)
    assert (stall.siblings_s, stall.samples) == (50, 5)
    assert stall.limit == pytest.approx(3 * 50 * few_samples_margin(5, 50))


def test_before_any_step_ended_the_stretch_runs_from_the_containers_start() -> None:
    start = _line("2025-04-v0.7-v0-profiling.log", "Starting to load model")
    t = _pod([(STARTED + 2, start)])
    stall = stall_of(t, ON, _history(weights=20))
    assert stall is not None and stall.step == "weights"
    assert stall.began == T0.timestamp() + STARTED and stall.limit == 120  # the floor (over 92.4)


def test_after_the_api_server_logged_complete_the_readiness_probe_is_timed() -> None:
    t = _pod([(STARTED + 30, V0_WEIGHTS), (STARTED + 90, COMPLETE)])
    stall = stall_of(t, ON, _history(weights=30, api_server=5, until_ready=8))
    assert stall is not None and (stall.step, stall.timed_as) == ("api_server", "until_ready")


def test_nothing_is_judged_without_the_log_or_the_siblings_or_when_off() -> None:
    history = _history(weights=30, memory_profiling=50)
    assert stall_of(_pod([]), ON, history) is None  # no line read
    t = _pod([(STARTED + 30, V0_WEIGHTS), (STARTED + 31, V0_BLOCKS)])
    assert stall_of(t, ON, history) is None  # no sibling's times after the KV cache is sized
    assert stall_of(t, ProgressConfig(enabled=False), _history(kv_cache=2)) is None  # off
    few = ProgressConfig(enabled=True, min_samples=6)
    assert stall_of(t, few, _history(kv_cache=2)) is None  # five siblings: too few
