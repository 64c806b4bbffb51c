"""Before the first step: vLLM logs its banner ("Initializing an LLM engine ...") before its
workers start and NCCL comes up, then nothing until it loads its weights. A pod whose banner is
seen and no step line after it is judged by what the container's start to the first step line
took its siblings, with the same floor as every step and 1.5 times the factor (nothing it
logged has told its pace yet): a hang in NCCL init is found by progress, not by the phase
budget. Real vLLM lines (tests/data/vllm_logs) at made-up times,
as in test_progress.py."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import LOG_ENDED
from remediator.policy.config import ProgressConfig
from remediator.policy.history import few_samples_margin
from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import READY, STEPS, _line, _name, _start, _uid

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: true, min_samples: 5, factor: 3, floor_s: 30}
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""

BANNER = (2.0, _line("2024-05-v0.4.2-kv-cache.log", "Initializing an LLM engine"))
# Siblings: the banner 2 s after the container's start, "Starting to load model" at 5 s (NCCL
# init in between), the weights in at 40 s; Ready at 110 s.
WITH_BANNER = [BANNER, *STEPS]
# Every limit here is set from five siblings' times (of a window of 50): widened by
# few_samples_margin, 1.54.
FEW = few_samples_margin(5, 50)
NCCL_LIMIT = 3 * 1.5 * FEW * 5  # 34.65 s: the factor, the first stretch's margin, 5 s
WEIGHTS_LIMIT = 3 * FEW * 40  # 184.8 s


def _siblings(run: Run, lines: list[tuple[float, str]], n: int = 5) -> float:
    for i in range(n):
        created = i * 1000.0
        started = _start(run, i, created, lines)
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, ready=started + READY))  # fmt: skip
    assert run.decisions == []
    return n * 1000.0


def _deleted_after(run: Run, started: float) -> float:
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    return decision.at - T0 - started


def test_a_pod_hung_in_nccl_init_is_found_by_progress_before_its_phase_budget() -> None:
    """Banner, then silence: the siblings took 5 s to their first step line, so the limit is
    34.65 s (6.93x that: 3, 1.5 times for the stretch, 1.54 for five siblings; over the
    30 s floor), hung two checks later (the phase budget would wait 620 s)."""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), [BANNER])
    run.at(T0 + started + NCCL_LIMIT + 19)
    assert run.decisions == []
    run.at(T0 + started + 700)
    assert _deleted_after(run, started) == pytest.approx(NCCL_LIMIT + 20)
    reason = run.decisions[0].reason
    assert "engine_init stalled before vLLM's first step line (NCCL init) for 55s" in reason
    assert "over its 35s limit for 3 checks in a row" in reason
    took = (
        "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 5s from their container's "
        "start to their first step line (P95; limit 6.93× that, at least 30s)"
    )
    assert took in reason
    assert run.decisions[0].stalled == "before_first_step"  # (min_age weighs it: its `stalled`)


def test_once_the_first_step_line_is_seen_the_pod_is_judged_in_weights_again() -> None:
    """It was slower than its siblings to its first step line (15 s, under the limit), then
    loads its weights: judged as loading them (siblings 40 s from the start: limit 185 s).
    (Its pace, 45 over 35 with the floor counted in, widens nothing: test_stall_pace.py.)"""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), [BANNER, (15.0, STEPS[0][1])])
    run.at(T0 + started + WEIGHTS_LIMIT + 19)
    assert run.decisions == []
    run.at(T0 + started + 700)
    assert _deleted_after(run, started) == pytest.approx(WEIGHTS_LIMIT + 20)
    assert "stalled in vLLM step weights for 205s" in run.decisions[0].reason


def test_a_pod_that_reaches_its_first_step_line_within_the_limit_is_left_alone() -> None:
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    slow = [BANNER, *((at + 20.0, line) for at, line in STEPS)]  # 25 s to its first step line
    started = _start(run, 9, created, slow)
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + READY + 20))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_siblings_whose_banner_was_not_seen_do_not_teach_the_stretch() -> None:
    """Their logs began at "Starting to load model": the stretch before it is unknown, so the
    pod with only its banner is judged as in `weights`, from its container's start."""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, STEPS), [BANNER])
    run.at(T0 + started + 700)
    assert _deleted_after(run, started) == pytest.approx(WEIGHTS_LIMIT + 20)
    reason = run.decisions[0].reason
    assert "stalled in vLLM step before_first_step (timed as weights) for 205s" in reason


def test_a_banner_from_the_run_before_a_restart_does_not_count() -> None:
    """The container restarted after its banner: this run's banner is not seen, so the pod is
    not judged before its first step (55 s) but as in `weights` from the restart (205 s)."""
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    started = _start(run, 9, created, [BANNER])
    restarted = started + 10.0
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=restarted))
    run.at(T0 + started + 700)
    assert _deleted_after(run, restarted) == pytest.approx(WEIGHTS_LIMIT + 20)
    assert "stalled in vLLM step weights" in run.decisions[0].reason


def test_a_log_no_longer_read_before_the_first_step_keeps_the_phase_budget() -> None:
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), [BANNER])
    banner = T0 + started + BANNER[0]
    run.session.feed(EngineStep("llm", _name(9), _uid(9), LOG_ENDED, None, None, banner), run)
    run.at(T0 + started + 1000)
    assert _deleted_after(run, started) == 620
    assert "over its 600s budget" in run.decisions[0].reason


def _hung_pod_inputs(created: float) -> list[dict[str, Any]]:
    """The NCCL-hung pod's inputs as they happened: the pod through its start, its banner
    twice (two TP workers' copies), then a line that marks no step (NCCL's)."""
    started = created + 10.0
    line = BANNER[1]
    nccl = _line("2024-05-v0.4.2-kv-cache.log", "Found nccl")
    return [
        pod(_name(9), _uid(9), watch="ADDED", created=created),
        pod(_name(9), _uid(9), created=created, scheduled=created + 1),
        pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started),
        vllm_logs.engine_log("llm", _name(9), line, T0 + started + 2),
        vllm_logs.engine_log("llm", _name(9), line, T0 + started + 3),
        vllm_logs.engine_log("llm", _name(9), nccl, T0 + started + 4),
    ]


def _decide(docs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    run.feed(*docs).at(T0 + created + 700)
    return [(d.action, d.target, d.at, d.reason, d.stalled) for d in run.decisions]


HAPPENED = _hung_pod_inputs(5000.0)


@settings(max_examples=30, deadline=None)
@given(st.permutations(HAPPENED), st.lists(st.sampled_from(HAPPENED), max_size=4))
def test_the_decision_on_a_pod_hung_before_its_first_step_does_not_depend_on_input_order(
    shuffled: list[dict[str, Any]], dups: list[dict[str, Any]]
) -> None:
    """Its banner before its pod is seen, the second copy first, duplicates: the same
    decision, at the same time, for the same reason."""
    want = _decide(HAPPENED)
    assert len(want) == 1 and "before vLLM's first step line" in want[0][3]
    assert _decide([*shuffled, *dups]) == want


def test_a_node_clock_an_hour_behind_does_not_age_the_stretch() -> None:
    """The kubelet stamps the container's start and the log lines on the node's clock, an
    hour behind the API server's here (proven: it started the container before the pod was
    scheduled). Uncorrected, the stretch would look an hour old the moment the banner shows."""
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    started, behind = created + 10.0, 3600.0
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1,
                 started=started - behind))  # fmt: skip
    run.feed(vllm_logs.engine_log("llm", _name(9), BANNER[1], T0 + started - behind + 2))
    # What the evidence proves: the node is at least 3591 s behind (its start, 9 s after the
    # pod was scheduled, is stamped 3591 s before it), so the stretch is timed from 9 s early.
    run.at(T0 + started + 40)
    assert run.decisions == []
    run.at(T0 + started + 700)
    assert _deleted_after(run, started) == pytest.approx(NCCL_LIMIT + 20 - 9)


DEFAULT_FACTOR = POLICY.replace("factor: 3, ", "")  # progress.factor at its default
FACTOR = ProgressConfig().factor


def test_a_pod_slow_everywhere_is_not_taken_for_hung_before_its_first_step_line() -> None:
    """Found in the simulator's random fleets: a healthy pod whose whole start drew twice the
    usual reached its first step line at 104 s against its siblings' 42 s, past 2x their P95
    and its checks: deleted. The stretch now gets 1.5 times the factor: here siblings take
    20 s, so at the default factor 2 the limit is 60 s, not 40 (92 s with five siblings:
    1.54 times); a pod at 70 s (3.5x) survives, a silent one is deleted at 92 s and two
    checks (the figures follow the default, should it move)."""
    late = [BANNER, *((at + 15.0, line) for at, line in STEPS)]  # first step line at 20 s
    slow = [BANNER, *((at + 65.0, line) for at, line in STEPS)]  # ... at 70 s
    _comes_up(DEFAULT_FACTOR, late, slow, READY + 65)
    run = make_run(DEFAULT_FACTOR)
    started = _start(run, 9, _siblings(run, late), [BANNER])
    run.at(T0 + started + 700)
    assert _deleted_after(run, started) == pytest.approx(FACTOR * 1.5 * FEW * 20 + 20)
    assert f"limit {round(FACTOR * 1.5 * FEW, 2):g}× that" in run.decisions[0].reason


def _comes_up(
    policy: str, siblings: list[tuple[float, str]], lines: list[tuple[float, str]], ready: float
) -> None:
    """A pod that logs `lines` after healthy siblings that logged theirs, Ready `ready` after
    its container started, is never deleted."""
    run = make_run(policy)
    created = _siblings(run, siblings)
    started = _start(run, 9, created, lines)
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + ready))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_a_pod_slow_to_its_banner_gets_as_much_longer_to_its_first_step_line() -> None:
    """Found in the simulator's random fleets (1645, 3410: untuned, first wave, a GPU node 3×
    slow): a healthy pod's banner came ~150 s after its container started, its siblings' at
    ~35 s, and it was deleted before its first step line, judged by their pace. The stretch
    to the banner tells its own: siblings 2 s, this pod 40 s, (40 + 30) / (2 + 30) = 2.19
    times the 34.65 s limit. Its first step line at 70 s: left alone; a pod as slow to its
    banner that then falls silent is deleted at 75.8 s and two checks."""
    slow = [(40.0, BANNER[1]), *((at + 65.0, line) for at, line in STEPS)]
    _comes_up(POLICY, WITH_BANNER, slow, READY + 65)
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), [(40.0, BANNER[1])])
    run.at(T0 + started + 700)
    pace = (40 + 30) / (2 + 30)
    assert _deleted_after(run, started) == pytest.approx(NCCL_LIMIT * pace + 20)
    assert f"widened {pace:.3g}× by its own pace so far" in run.decisions[0].reason
