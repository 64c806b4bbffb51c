"""Progress-aware engine init: a pod is judged by the vLLM step it is in against what that step
took its siblings, not by its whole phase. Real vLLM lines (tests/data/vllm_logs) at made-up
times: five healthy siblings teach the steps, then one pod hangs, or crawls but keeps going."""

from __future__ import annotations

import pytest

from remediator.contract.errors import ConfigError
from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import LOG_ENDED
from remediator.policy.engine import READ_LOG_S
from remediator.policy_file import load_policy
from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: %s, min_samples: %d, factor: 1.5, floor_s: 120}
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""


def _line(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


# A V1 start (vLLM 0.11 and 0.9 lines), seconds after the container started, as a sibling
# logs them: weights 40 s, torch.compile 20 s, profiling 2 s, KV cache and graphs 37.5 s,
# API server 1.5 s, then Ready 9 s later (engine init: 110 s).
STEPS = [
    (5.0, _line("2025-04-v0.7-v0-profiling.log", "Starting to load model")),
    (40.0, _line("2025-11-v1-engine.log", "Model loading took")),
    (48.0, _line("2025-11-v1-engine.log", "Dynamo bytecode")),
    (60.0, _line("2025-11-v1-engine.log", "torch.compile takes")),
    (61.0, _line("2025-11-v1-engine.log", "Available KV cache memory")),
    (62.0, _line("2025-11-v1-engine.log", "GPU KV cache size")),
    (99.0, _line("2025-06-v1-api-server.log", "Graph capturing finished")),
    (99.5, _line("2025-06-v1-api-server.log", "init engine")),
    (100.0, _line("2025-06-v1-api-server.log", "Starting vLLM API server")),
    (101.0, "INFO:     Application startup complete."),
]
READY = 110.0


# The same lines from a start that crawls: each stretch between lines that end a step takes
# 110 s (up to 55 times its siblings', under each 120 s limit); Ready at 670 s.
CRAWL = [110.0 * k for k in (0, 1, 1.4, 2, 3, 3.05, 4, 4.05, 4.5, 5)]
CRAWL[0] = 5.0
CRAWL_READY = 670.0


def _name(i: int) -> str:
    return f"vllm-70b-7c9d5b6f4-s{i}"


def _uid(i: int) -> str:
    return f"aaaaaaaa-0000-0000-0000-{i:012d}"


def _start(run: Run, i: int, created: float, lines: list[tuple[float, str]]) -> float:
    """A pod whose container starts 10 s after it is created and logs `lines` from then."""
    started = created + 10.0
    run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1, started=started))
    for at, line in lines:
        run.feed(vllm_logs.engine_log("llm", _name(i), line, T0 + started + at))
    return started


def _siblings(
    run: Run, n: int = 5, lines: list[tuple[float, str]] = STEPS, ready: float = READY
) -> float:
    """`n` healthy cold starts of `lines`, each Ready `ready` after its container started,
    one after the other; returns when the next may be created."""
    for i in range(n):
        created = i * 1000.0
        started = _start(run, i, created, lines)
        run.feed(
            pod(
                _name(i),
                _uid(i),
                created=created,
                scheduled=created + 1,
                started=started,
                ready=started + ready,
            )
        )
    assert run.decisions == []
    return n * 1000.0


def _run(enabled: bool = True, min_samples: int = 5) -> Run:
    return make_run(POLICY % ("true" if enabled else "false", min_samples))


def _delete_at(run: Run) -> float:
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    return decision.at - T0


def test_a_pod_stalled_in_a_step_is_deleted_long_before_its_phase_budget() -> None:
    """It sized its KV cache and went quiet: siblings took 37 s from there to graphs captured
    (V1 says nothing in between), so the limit is the 120 s floor, hung 2 checks later."""
    run = _run()
    started = _start(run, 9, _siblings(run), STEPS[:6])
    run.at(T0 + started + 62 + 120 + 19)
    assert run.decisions == []
    run.at(T0 + started + 600)
    assert _delete_at(run) == started + 62 + 120 + 20
    reason = run.decisions[0].reason
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs) for 140s" in reason
    assert "over its 120s limit for 3 checks in a row" in reason
    assert "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 38s there (P95" in reason


def test_a_stall_while_loading_weights_is_found_too() -> None:
    run = _run()
    started = _start(run, 9, _siblings(run), STEPS[:1])  # "Starting to load model …" only
    run.at(T0 + started + 600)
    assert _delete_at(run) == started + 120 + 20
    assert "stalled in vLLM step weights for 140s" in run.decisions[0].reason
    assert "took 40s there" in run.decisions[0].reason


def _crawl(run: Run) -> tuple[float, float]:
    created = _siblings(run)
    lines = [(at, line) for at, (_, line) in zip(CRAWL, STEPS, strict=True)]
    return created, _start(run, 9, created, lines)


def test_a_start_that_keeps_ending_steps_is_never_deleted_for_being_slow_overall() -> None:
    """670 s of engine init, over the 600 s phase budget: it becomes Ready untouched."""
    run = _run()
    created, started = _crawl(run)
    run.at(T0 + started + CRAWL_READY - 1)
    assert run.decisions == []
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + CRAWL_READY))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_without_progress_the_same_slow_start_is_deleted_at_its_phase_budget() -> None:
    """The control for the test above: the policy's default judges the whole phase."""
    run = _run(enabled=False)
    _, started = _crawl(run)
    run.at(T0 + started + CRAWL_READY - 1)
    assert _delete_at(run) == started + 600 + 20
    assert "engine_init for 620s, over its 600s budget" in run.decisions[0].reason


def test_a_pod_whose_log_is_not_read_keeps_its_phase_budget() -> None:
    """Its log is asked for when the budget runs out (tests/policy/test_read_log_first.py);
    none comes, and the budget judges it READ_LOG_S later."""
    run = _run()
    started = _start(run, 9, _siblings(run), [])
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 620 + READ_LOG_S
    assert "over its 600s budget" in run.decisions[0].reason


def test_a_step_too_few_siblings_went_through_keeps_the_phase_budget() -> None:
    run = _run(min_samples=6)
    started = _start(run, 9, _siblings(run), STEPS[:6])
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 620
    assert "over its 600s budget" in run.decisions[0].reason
    assert "stalled in vLLM step kv_cache for" in run.decisions[0].reason  # the step note


@pytest.mark.parametrize(("siblings", "judged"), [(3, True), (2, False)])
def test_three_siblings_times_judge_a_step_by_default(siblings: int, judged: bool) -> None:
    """A small workload's first pods: three siblings through a stretch judge it (their few
    widen its limit), two leave the phase budget (docs/simulation-defaults.md: in random
    fleets, 5 kept many a hung first-wave pod to a sibling's whole cold start)."""
    run = make_run(POLICY.replace("min_samples: %d, ", "") % "true")
    started = _start(run, 9, _siblings(run, n=siblings), STEPS[:6])
    run.at(T0 + started + 1000)
    reason = run.decisions[0].reason
    if judged:
        assert _delete_at(run) == started + 62 + 120 + 20
        assert "3 siblings of meta-llama/Llama-3.1-70B-Instruct took 38s there" in reason
    else:
        assert _delete_at(run) == started + 620
        assert "over its 600s budget" in reason


def test_progress_is_on_by_default_with_its_log_follower() -> None:
    """By simulation (docs/simulation-defaults.md); these tests pin the figures they use."""
    rules = load_policy("").rules
    cfg = rules.stuck_pod.progress
    assert cfg.enabled and rules.engine_logs.follow
    assert (cfg.factor, cfg.quantile, cfg.floor_s, cfg.min_samples) == (2.0, 0.95, 30.0, 3)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("stuck_pod: {progress: {quantile: 0.2}}", "quantile from 0.5 to 1"),
        ("stuck_pod: {progress: {factor: 0.5}}", "below 1"),
        ("stuck_pod: {progress: {floor_s: -1}}", "negative"),
        ("stuck_pod: {progress: {min_samples: 0}}", "below 1"),
        ("stuck_pod: {progress: {enable: true}}", "unknown key"),
    ],
)
def test_bad_progress_settings_are_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        load_policy(text)


def test_step_lines_read_before_the_pod_is_seen_count_the_same() -> None:
    """A log line can arrive before the pod's watch event: it waits, then judges the pod."""
    run = _run()
    created = _siblings(run)
    started = created + 10.0
    for at, line in STEPS[:6]:
        run.feed(vllm_logs.engine_log("llm", _name(9), line, T0 + started + at))
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started))
    run.at(T0 + started + 600)
    assert _delete_at(run) == started + 62 + 120 + 20
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs)" in run.decisions[0].reason


def test_once_the_log_is_no_longer_read_the_phase_budget_is_back() -> None:
    """The follower hit its byte bound (or the stream broke) after the KV cache was sized:
    silence then says nothing of progress, so the pod is not judged stalled by it."""
    run = _run()
    started = _start(run, 9, _siblings(run), STEPS[:6])
    last = T0 + started + 62
    run.session.feed(EngineStep("llm", _name(9), _uid(9), LOG_ENDED, None, None, last), run)
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 620
    assert "over its 600s budget" in run.decisions[0].reason


MISSED = _line("2025-11-v1-engine.log", "Cache the graph")  # torch.compile missed its cache
# From 0.12 a miss may say only this (no "Cache the graph" line without the compile cache)
MISSED_RANGE = _line("2026-09-v0.29-windows-v2-runner-compile-range.log", "compile range")


@pytest.mark.parametrize("missed", [MISSED, MISSED_RANGE])
def test_a_compile_that_missed_its_cache_is_not_judged_by_siblings_that_hit_it(
    missed: str,
) -> None:
    """The siblings' compiles took 20 s (no "Cache the graph ... for later use": a hit); this
    pod compiles from scratch, which takes minutes: only its phase budget judges it."""
    run = _run()
    started = _start(run, 9, _siblings(run), [*STEPS[:3], (53.0, missed)])
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 620
    assert "over its 600s budget" in run.decisions[0].reason


def test_a_compile_that_hit_its_cache_is_judged_like_its_siblings() -> None:
    run = _run()
    started = _start(run, 9, _siblings(run), STEPS[:3])
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 40 + 120 + 20
    assert "stalled in vLLM step torch_compile for 140s" in run.decisions[0].reason


def test_a_missed_compile_is_judged_by_siblings_that_missed_theirs_too() -> None:
    run = _run()
    missing = [*STEPS[:3], (53.0, MISSED), *STEPS[3:]]
    for i in range(5):
        created = i * 1000.0
        started = _start(run, i, created, missing)
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, ready=started + READY))  # fmt: skip
    started = _start(run, 9, 5000.0, missing[:4])
    run.at(T0 + started + 1000)
    assert _delete_at(run) == started + 40 + 120 + 20
    reason = run.decisions[0].reason
    assert "stalled in vLLM step torch_compile (timed as torch_compile_missed) for 140s" in reason


DRAFT_LOG = "2026-05-v0.2x-tp2-draft-compile-after-profiling.log"
# A start with a draft head (vLLM 0.2x, EAGLE): after the model's profiling run the draft
# head compiles, here from scratch, 200 s; then the KV cache, graphs and API server as above.
DRAFT = [
    *STEPS[:4],
    (62.0, _line(DRAFT_LOG, "Initial profiling")),
    (62.0, _line(DRAFT_LOG, "eagle_head")),
    (262.0, _line("2026-05-v0.2x-tp2-eagle-compile-range.log", "torch.compile took")),
    *((at + 202.0, line) for at, line in STEPS[4:]),
]


def test_a_draft_head_compiling_after_the_profiling_run_is_judged_as_a_compile() -> None:
    """Its siblings took 222 s from their weights to their draft head compiled. Judged as
    the stretch after profiling (the KV cache and graphs: 37 s, the 120 s floor) the pod
    was deleted 140 s into a healthy compile."""
    run = _run()
    started = _start(run, 9, _siblings(run, lines=DRAFT, ready=READY + 202), DRAFT[:6])
    run.at(T0 + started + 62 + 222)
    assert run.decisions == []
    run.at(T0 + started + 1000)
    reason = run.decisions[0].reason
    assert "stalled in vLLM step torch_compile for" in reason, reason


GRAPH_LOG = "2026-05-v0.2x-tp2-eagle-compile-range.log"
SIZED_LOG = "2026-03-v0.18-kv-cache.log"
# A V1 start that measures its CUDA graphs' memory (0.18 on): the profiling run's line at
# 61 s, then 45 s capturing a few graphs to measure them, the KV cache sized at 106 s, the
# graphs captured 25 s later.
GRAPH_MEMORY = [
    *STEPS[:4],
    (61.0, _line(GRAPH_LOG, "Initial profiling/warmup run took")),
    (61.0, _line(GRAPH_LOG, "Profiling CUDA graph memory")),
    (106.0, _line(SIZED_LOG, "Estimated CUDA graph memory")),
    (106.0, _line(SIZED_LOG, "Available KV cache memory")),
    (107.0, _line(SIZED_LOG, "GPU KV cache size")),
    *((at + 33.0, line) for at, line in STEPS[6:]),
]


def _graph_memory_siblings() -> tuple[Run, float]:
    run = make_run(POLICY.replace("floor_s: 120", "floor_s: 30") % ("true", 5))
    return run, _siblings(run, lines=GRAPH_MEMORY, ready=READY + 33)


def test_a_pod_measuring_its_graphs_memory_is_judged_as_profiling_memory() -> None:
    """Until the KV cache is sized the engine is still profiling memory. Judged as the
    stretch after it (the graphs' 26 s capture: a 59 s limit) a pod twice as slow as its
    siblings there (90 s against 45 s, as any step may be) was deleted at 79 s; judged by
    the siblings' whole memory profiling (47 s: a 109 s limit) it is not."""
    run, created = _graph_memory_siblings()
    started = _start(run, 9, created, GRAPH_MEMORY[:6])
    run.at(T0 + started + 61 + 90)
    assert run.decisions == []
    for _, line in GRAPH_MEMORY[6:8]:
        run.feed(vllm_logs.engine_log("llm", _name(9), line, T0 + started + 61 + 90))
    run.at(T0 + started + 61 + 150)
    assert run.decisions == []


def test_a_pod_hung_measuring_its_graphs_memory_is_named_by_that_step() -> None:
    run, created = _graph_memory_siblings()
    started = _start(run, 9, created, GRAPH_MEMORY[:6])
    run.at(T0 + started + 600)
    assert _delete_at(run) == pytest.approx(started + 61 + 109 + 20, abs=0.5)
    reason = run.decisions[0].reason
    assert "stalled in vLLM step memory_profiling for 129s, over its 109s limit" in reason
    assert "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 47s there" in reason
