"""Progress from vLLM's OpenTelemetry start-up spans instead of its log: the same steps, so the
same stall, found before the phase budget and said by step. Siblings and the hung pod send
spans only (as serve stores them from /v1/traces: EngineSpan documents)."""

from __future__ import annotations

from typing import Any

from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: true, min_samples: 5, factor: 1.5, floor_s: 120}  # the figures used here
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""

# Seconds after the container started: weights loaded, dozens of graph pieces compiled, the
# KV cache sized and allocated, graphs captured; Ready at 110 s.
SPANS = [
    ("Load model", 5.0, 40.0),
    *(("Compile graph", 48.0 + 0.5 * k, 48.5 + 0.5 * k) for k in range(24)),  # ends at 60
    ("Capture model", 62.0, 99.0),
    ("Prepare model", 41.0, 99.5),
]
READY = 110.0


def _name(i: int) -> str:
    return f"vllm-70b-7c9d5b6f4-t{i}"


def _uid(i: int) -> str:
    return f"bbbbbbbb-0000-0000-0000-{i:012d}"


def _span(i: int, name: str, start: float, end: float) -> dict[str, Any]:
    ns = 1_000_000_000
    return {"kind": "EngineSpan", "namespace": "llm", "pod": _name(i), "uid": _uid(i),
            "name": name, "start_ns": round(start * ns), "end_ns": round(end * ns)}  # fmt: skip


def _start(run: Run, i: int, created: float, spans: list[tuple[str, float, float]]) -> float:
    started = created + 10.0
    run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1, started=started))
    for name, a, b in spans:
        run.feed(_span(i, name, T0 + started + a, T0 + started + b))
    return started


def _siblings(run: Run) -> float:
    for i in range(5):
        created = i * 1000.0
        started = _start(run, i, created, SPANS)
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, ready=started + READY))  # fmt: skip
    assert run.decisions == []
    return 5000.0


def test_a_pod_whose_spans_stop_after_compiling_is_deleted_by_its_step() -> None:
    """Compiled (the last graph ended at 60 s) and went quiet: spans do not say when the
    memory profile ends, so the stretch is timed as the siblings' next step spans mark, the
    KV cache (2 s, to Capture model's start); the 120 s floor is the limit, hung 2 checks on."""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run), SPANS[:25])
    run.at(T0 + started + 60 + 120 + 19)
    assert run.decisions == []
    run.at(T0 + started + 600)
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    assert decision.at - T0 == started + 60 + 120 + 20
    assert "stalled in vLLM step memory_profiling (timed as kv_cache) for 140s" in decision.reason
    assert "over its 120s limit for 3 checks in a row" in decision.reason
    assert "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 2s there" in decision.reason


def test_a_compile_that_keeps_ending_graphs_is_not_stalled() -> None:
    """A slow compile: a graph piece every 100 s, 40 of them (over an hour, far past the
    600 s phase budget; more pieces than a step keeps times of), then graphs and Ready:
    each stretch is under its 120 s limit."""
    run = make_run(POLICY)
    created = _siblings(run)
    slow = [("Load model", 5.0, 40.0)]
    slow += [("Compile graph", 40.0 + 100 * k, 140.0 + 100 * k) for k in range(40)]
    end = 140.0 + 100 * 39
    slow += [("Capture model", end + 2, end + 40), ("Prepare model", 41.0, end + 41)]
    started = _start(run, 9, created, [])
    for name, a, b in slow:
        run.at(T0 + started + b)
        run.feed(_span(9, name, T0 + started + a, T0 + started + b))
    run.at(T0 + started + end + 50)
    assert run.decisions == []
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + end + 50))  # fmt: skip
    run.at(T0 + started + end + 10_000)
    assert run.decisions == []
