"""A model's first wave: a pod hangs in NCCL init before any sibling has timed that stretch, so
its phase budget times it. It is looked at again each check meanwhile (policy/engine.py,
`_deadline`'s `look_again`): once its siblings' cold starts are learned, it is judged by their
times at the next check, not when the budget's timer fires; the same when another decider's
cold starts are relayed to it (a Kafka worker's partitions), so both decide at the same check.
Real vLLM lines at made-up times, as in test_progress_first_step.py."""

from __future__ import annotations

import pytest

from remediator.policy.history import step_key
from remediator.timeline.engine_steps import BEFORE_FIRST_STEP
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import READY, _name, _start, _uid
from tests.policy.test_progress_first_step import BANNER, NCCL_LIMIT, POLICY, WITH_BANNER
from tests.policy.test_progress_first_step import _siblings as _finished_siblings

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
# The hung pod's container starts at 10 s; its phase budget (600 s) lapses at 630 s with the
# checks. Its siblings start beside it and are Ready by 10 + 30 + 4 + READY = 154 s.
HUNG_STARTED = 10.0
SIBLINGS_READY = HUNG_STARTED + 30 + 4 + READY
CHECK = 10.0  # stuck_pod.check_interval_s: its checks from its banner line (12 s) on


def _hung(run: Run) -> None:
    assert _start(run, 9, 0.0, [BANNER]) == HUNG_STARTED


def _first_wave(run: Run) -> None:
    """Five siblings created beside the hung pod, 30 s after it, healthy."""
    for i in range(5):
        created = 30.0 + i
        started = _start(run, i, created, WITH_BANNER)
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, ready=started + READY))  # fmt: skip


def test_a_first_wave_pod_hung_in_nccl_init_is_judged_once_its_siblings_are_learned() -> None:
    run = make_run(POLICY)
    _hung(run)
    _first_wave(run)
    run.at(T0 + SIBLINGS_READY + CHECK)
    (decision,) = run.decisions
    assert decision.action == "delete-pod" and decision.target == _name(9)
    assert "stalled before vLLM's first step line (NCCL init)" in decision.reason
    # Due when the stall's limit and checks had run: found late, never sooner than that.
    assert decision.at - T0 == pytest.approx(HUNG_STARTED + NCCL_LIMIT + 20)


def test_siblings_relayed_from_another_decider_judge_it_too() -> None:
    """A Kafka worker's pod: its siblings finished on other partitions, whose deciders relay
    what they learned (`Session.restore_learned` takes the same path, `Decider.learn`)."""
    teacher = make_run(POLICY, keeps_learned=True)
    _finished_siblings(teacher, WITH_BANNER)
    samples = teacher.session.learned()
    assert sum(1 for _, key, _ in samples if key == step_key(BEFORE_FIRST_STEP)) == 5
    run = make_run(POLICY)
    _hung(run)
    run.at(T0 + 100)
    assert run.decisions == []
    run.session.restore_learned(samples)
    run.at(T0 + 100 + CHECK)
    (decision,) = run.decisions
    assert decision.target == _name(9)
    assert "5 siblings of " + MODEL in decision.reason


def test_without_siblings_the_budget_still_times_it() -> None:
    run = make_run(POLICY)
    _hung(run)
    run.at(T0 + HUNG_STARTED + 600 + 19)
    assert run.decisions == []
    run.at(T0 + HUNG_STARTED + 600 + 21)
    assert [d.target for d in run.decisions] == [_name(9)]
