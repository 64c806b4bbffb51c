"""A model's first pods on a slow node: once a pod has logged its first step line and before it
has ended a step, its engine-init budget (a whole cold start of its siblings, for want of
history) widens by its pace so far, judged against as few siblings as set that budget
(`pace.first_wave_pace`).

Random fleets 3249 and 5142 (untuned, one GPU node 3× slow): a Mixtral pod there was deleted
569 s into loading its weights, over a 533 s budget set from four siblings' whole cold starts,
though its first step line came at 81 s against their 33 s; a small model's pods there were
deleted one after another (a kill loop). Real vLLM lines at made-up times, as in
test_progress.py; the default policy but for its guardrails and static engine-init budget."""

from __future__ import annotations

import pytest

from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import READY, STEPS, _name, _siblings, _start, _uid
from tests.policy.test_progress_first_step import BANNER

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 60}
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""

# Two siblings: banner at 2 s, first step line at 5 s, Ready 110 s after their container's
# start, created 10 s before it: their whole cold start, 120 s, is the budget.
WHOLE = 10.0 + READY


def _first_wave(first_step: float, more: tuple[tuple[float, str], ...] = ()) -> tuple[Run, float]:
    """Two siblings, then a pod whose banner and first step line come at `first_step` (and
    `more` lines after): when its container started."""
    run = make_run(POLICY)
    created = _siblings(run, 2, [BANNER, *STEPS])
    lines = [(first_step - 1.0, BANNER[1]), (first_step, STEPS[0][1]), *more]
    return run, _start(run, 9, created, lines)


def _deleted_after(run: Run, started: float) -> float:
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    return decision.at - T0 - started


def test_a_pod_slow_to_its_first_step_line_gets_its_budget_widened_by_its_pace() -> None:
    """45 s to its first step line against its siblings' 5 s: (45 + 30) / (5 + 30) = 2.14
    with the floor counted in, so 257 s rather than 120 s; silent after it, deleted then."""
    pace = (45.0 + 30.0) / (5.0 + 30.0)
    run, started = _first_wave(45.0)
    run.at(T0 + started + WHOLE * pace + 19)
    assert run.decisions == []
    run.at(T0 + started + 3600)
    assert _deleted_after(run, started) == pytest.approx(WHOLE * pace + 20)
    reason = run.decisions[0].reason
    assert "a whole cold start; 2.14× 120s for its own pace so far)" in reason


def test_a_slow_pod_that_keeps_ending_steps_is_not_deleted() -> None:
    """The pod of fleet 3249 in small: its weights in at 3.5 times its siblings' pace, past
    the widened budget, then every step as slow; Ready at 400 s."""
    later = tuple((at * 3.5 + 30.0, line) for at, line in STEPS[1:])
    run, started = _first_wave(45.0, later)
    run.at(T0 + started + 399)
    run.feed(pod(_name(9), _uid(9), created=2000.0, scheduled=2001.0, started=started,
                 ready=started + 400.0))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_a_pod_at_its_siblings_pace_keeps_the_whole_cold_start() -> None:
    """6 s to its first step line: 1.03, under PACE_FROM (1.3), widens nothing."""
    run, started = _first_wave(6.0)
    run.at(T0 + started + 3600)
    assert _deleted_after(run, started) == pytest.approx(WHOLE + 20)
    assert "a whole cold start) for 3 checks" in run.decisions[0].reason


def test_a_pod_whose_siblings_logged_no_banner_is_judged_as_before() -> None:
    """Their logs began at the first step line: the stretch before it is timed by no
    sibling, so nothing tells the pod's pace."""
    run = make_run(POLICY)
    created = _siblings(run, 2, STEPS)
    started = _start(run, 9, created, [(44.0, BANNER[1]), (45.0, STEPS[0][1])])
    run.at(T0 + started + 3600)
    assert _deleted_after(run, started) == pytest.approx(WHOLE + 20)


def test_a_pod_slow_to_its_banner_alone_keeps_the_whole_cold_start() -> None:
    """Its banner at 40 s against its siblings' 2 s, and no step line after it (hung in NCCL
    init): a banner against one or two siblings' is mostly noise, so nothing widens."""
    run = make_run(POLICY)
    created = _siblings(run, 2, [BANNER, *STEPS])
    started = _start(run, 9, created, [(40.0, BANNER[1])])
    run.at(T0 + started + 3600)
    assert _deleted_after(run, started) == pytest.approx(WHOLE + 20)
