"""Read a pod's log before judging it on its phase budget alone: eight logs are followed at
once, and a first wave has more pods in engine init. A pod whose budget runs out while its log
was never read is asked for (`PolicyEngine.logs_wanted`, which the follower reads first) and
judged once its lines are in, or READ_LOG_S later on the budget as before.

Found by random fleets 3043, 3728 and 8569 (bench_random_fleets.py: untuned, a GPU node 2-3×
slow): a first-wave pod there was deleted over a budget its siblings elsewhere had set, its log
unread; read, it showed steps ending, one its API server started. Real vLLM lines
(tests/data/vllm_logs) at made-up times, as in test_progress.py."""

from __future__ import annotations

from remediator.policy.engine import READ_LOG_S
from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import CRAWL, CRAWL_READY, STEPS, _name, _siblings, _uid

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: true, factor: 1.5, floor_s: 120}
engine_logs: {follow: %s}
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""
DUE = 620.0  # the budget and two checks, from the container's start
CRAWLING = [(at, line) for at, (_, line) in zip(CRAWL, STEPS, strict=True)]


def _unread(follow: bool = True, siblings: int = 1) -> tuple[Run, float]:
    """A pod in engine init with nothing of its log read, after `siblings` healthy cold
    starts whose logs told their steps; its container's start."""
    run = make_run(POLICY % ("true" if follow else "false"))
    created = _siblings(run, siblings) if siblings else 0.0
    started = created + 10.0
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started))
    return run, started


def _deleted_at(run: Run) -> float:
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    return decision.at - T0


def test_its_log_is_asked_for_and_once_read_it_is_judged_by_its_steps() -> None:
    run, started = _unread()
    run.at(T0 + started + DUE)
    assert run.decisions == []
    assert run.session.engine.logs_wanted() == [_uid(9)]
    (note,) = run.notes
    assert note.subject == f"llm/{_name(9)}" and "its log never read: read first" in note.reason
    # The follower reads it from its first line: a start that keeps ending steps (its last
    # at 550 s) is not deleted for being slow overall (test_own_pace.py), and is Ready.
    for at, line in CRAWLING:
        run.feed(vllm_logs.engine_log("llm", _name(9), line, T0 + started + at))
    run.at(T0 + started + CRAWL_READY - 1)
    assert run.decisions == [] and len(run.notes) == 1
    run.feed(pod(_name(9), _uid(9), created=started - 10, scheduled=started - 9,
                 started=started, ready=started + CRAWL_READY))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == [] and run.session.engine.logs_wanted() == []


def test_a_log_that_never_comes_leaves_the_budget_to_judge_it_a_little_later() -> None:
    run, started = _unread()
    run.at(T0 + started + DUE + READ_LOG_S - 1)
    assert run.decisions == []
    run.at(T0 + started + 3600)
    assert _deleted_at(run) == started + DUE + READ_LOG_S
    assert "over its 600s budget" in run.decisions[0].reason
    assert len(run.notes) == 1  # said once


def test_with_no_log_followed_or_no_sibling_step_known_the_budget_judges_at_once() -> None:
    """Nothing would read it (engine_logs.follow off), or no sibling's log has told a vLLM
    step (another engine, or none read yet): no wait for a log that tells nothing."""
    for run, started in (_unread(follow=False), _unread(siblings=0)):
        run.at(T0 + started + 3600)
        assert _deleted_at(run) == started + DUE
        assert run.notes == [] and run.session.engine.logs_wanted() == []
