"""A model's first wave, judged by its own pace: where no sibling has timed the stretch a pod's
engine is in, the phase budget judges it, but a start that keeps ending steps is not deleted
for being slow overall. Past the budget, its stretch may last `progress.factor` times its
longest step so far (at least the floor, at most the whole budget).

Found by 200 random fleets (2026-12-05): untuned, eight small models, a registry three times
slower, no engine hang. A first-wave pod's engine init took 299 s against a 277 s budget (the
one sibling's whole cold start). It ended a step 8 s before it was deleted, 2 s before Ready.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import CRAWL, CRAWL_READY, STEPS

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: true, factor: 1.5, floor_s: 120}
guardrails:
  min_age: {factor: 0}
"""
NAME, UID = "vllm-70b-7c9d5b6f4-first", "aaaaaaaa-0000-0000-0000-000000000042"
CREATED = 0.0
STARTED = CREATED + 10.0
# The crawl's lines (110 s between most, its longest step 110 s), no sibling before it.
LINES = [(at, line) for at, (_, line) in zip(CRAWL, STEPS, strict=True)]


def _first_pod(run: Run, lines: list[tuple[float, str]]) -> None:
    run.feed(pod(NAME, UID, created=CREATED, scheduled=CREATED + 1, started=STARTED))
    for at, line in lines:
        run.feed(vllm_logs.engine_log("llm", NAME, line, T0 + STARTED + at))


def test_a_first_wave_start_that_keeps_ending_steps_outlives_its_phase_budget() -> None:
    """670 s of engine init against a 600 s budget, no sibling to time its steps: Ready."""
    run = make_run(POLICY)
    _first_pod(run, LINES)
    run.at(T0 + STARTED + CRAWL_READY - 1)
    assert run.decisions == [] and run.held == []
    run.feed(pod(NAME, UID, created=CREATED, scheduled=CREATED + 1, started=STARTED,
                 ready=STARTED + CRAWL_READY))  # fmt: skip
    run.at(T0 + STARTED + 3600)
    assert run.decisions == []


def test_one_that_goes_silent_past_its_own_pace_is_deleted() -> None:
    """Its last line (the API server's) at 550 s; its longest step memory profiling's, 115.5 s
    (220 -> 335.5 s): 1.5 times that of silence allowed, then the checks."""
    run = make_run(POLICY)
    _first_pod(run, LINES)
    due = STARTED + 550 + 1.5 * 115.5 + 20
    run.at(T0 + due - 1)
    assert run.decisions == []
    run.at(T0 + STARTED + 3600)
    (d,) = run.decisions
    assert d.action == "delete-pod" and d.at == T0 + due
    assert "over its 600s budget" in d.reason
    assert "193s since its last step line, over its own pace (173s: 1.5× its longest step, " \
           "116s, at least 120s" in d.reason  # fmt: skip


def test_one_silent_long_before_its_budget_lapsed_keeps_the_budget() -> None:
    """Quiet since 220 s: the budget (600 s) is the later of the two, as before."""
    run = make_run(POLICY)
    _first_pod(run, LINES[:4])
    run.at(T0 + STARTED + 3600)
    (d,) = run.decisions
    assert d.at == T0 + STARTED + 620
    assert "over its 600s budget" in d.reason and "400s since its last step line" in d.reason


def test_without_progress_the_budget_alone_judges() -> None:
    run = make_run(POLICY.replace("enabled: true", "enabled: false"))
    _first_pod(run, LINES)
    run.at(T0 + STARTED + 3600)
    (d,) = run.decisions
    assert d.at == T0 + STARTED + 620


def test_a_node_clock_an_hour_behind_does_not_age_the_stretch() -> None:
    """The kubelet stamps the container's start and the log lines on the node's clock, an hour
    behind the API server's here (proven: it started the container before the pod was
    scheduled). Uncorrected, the last step line would look an hour old, and the pod would go
    at its budget as before."""
    behind = 3600.0
    run = make_run(POLICY)
    run.feed(pod(NAME, UID, created=CREATED, scheduled=CREATED + 1, started=STARTED - behind))
    for at, line in LINES:
        run.feed(vllm_logs.engine_log("llm", NAME, line, T0 + STARTED - behind + at))
    run.at(T0 + STARTED + CRAWL_READY - 12)
    assert run.decisions == []
    run.at(T0 + STARTED + 3600)
    (d,) = run.decisions  # silent since its last line: its pace, 9 s early (what is proven)
    assert d.at == pytest.approx(T0 + STARTED + 550 + 1.5 * 115.5 + 20 - 9)


def _inputs() -> list[Any]:
    """The silent first-wave pod's watch event and log lines, fresh each call."""
    lines = [vllm_logs.engine_log("llm", NAME, line, T0 + STARTED + at) for at, line in LINES]
    return [pod(NAME, UID, created=CREATED, scheduled=CREATED + 1, started=STARTED), *lines]


def _decided(items: list[Any]) -> list[tuple[str, float, str]]:
    run = make_run(POLICY)
    for item in items:
        run.feed(item)
    run.at(T0 + STARTED + 3600)
    return [(d.action, d.at, d.reason) for d in run.decisions]


@settings(max_examples=20, deadline=None)
@given(st.permutations(range(len(LINES) + 1)))
def test_the_decision_does_not_depend_on_input_order(order: list[int]) -> None:
    """Its lines before its pod is seen, or in any order: the same deletion, at the same
    time, for the same reason."""
    want = _decided(_inputs())
    assert len(want) == 1
    items = _inputs()
    assert _decided([items[i] for i in order]) == want
