"""A learned container-start budget under the static one (`adaptive.lower`).

Found by random fleets: on a tuned fleet whose containers start in ~3 s, a pod whose GPU
driver hung (its container never starts) waited out the seed's static 300 s before it was
deleted, and P99 time to Ready was 362 s with no engine hang at all. Once the model's
siblings have started their containers, the budget is what they took (1.5 x their P99,
widened for few samples), never below `adaptive.lower_floor_s` (120 s). Default policy,
unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.errors import ConfigError
from remediator.policy_file import load_policy
from tests.policy.builders import MODEL, T0, pod
from tests.policy.conftest import Run, make_run

HUNG = dict(name="vllm-70b-7c9d5b6f4-hung0", uid="aaaaaaaa-0000-0000-0000-0000000000ff")


def _siblings(run: Run, n: int, start: float = 3.0) -> float:
    """`n` siblings that each started their container `start` s after being scheduled and
    were Ready a minute later, one every 100 s: when the last was Ready."""
    at = 0.0
    for i in range(n):
        at = i * 100.0
        run.feed(pod(f"vllm-70b-7c9d5b6f4-s{i:03d}", f"bbbbbbbb-0000-0000-0000-{i:012d}",
                     created=at, scheduled=at + 1, started=at + 1 + start,
                     ready=at + 61 + start))  # fmt: skip
    return at + 61 + start


def _hung(run: Run, at: float) -> float:
    """A pod scheduled at `at` whose container never starts: when its container start began."""
    run.feed(pod(**HUNG, created=at, scheduled=at + 1, waiting="ContainerCreating"))
    return at + 1


def test_a_driver_hang_beside_fast_siblings_is_deleted_at_the_floor_not_the_static_budget() -> None:
    run = make_run("")
    last = _siblings(run, 10)
    began = _hung(run, last + 10)
    run.at(T0 + began + 139)
    assert run.decisions == []  # 120 s + 2 more checks
    run.at(T0 + began + 300)
    (d,) = run.decisions
    assert d.action == "delete-pod" and d.target == HUNG["name"] and d.at == T0 + began + 140
    assert (
        "container_start" in d.reason
        and "over its 120s budget (the adaptive floor: 1.86×P99 of " in d.reason
    )


def test_without_siblings_or_with_lower_off_the_static_budget_stands() -> None:
    """No sibling yet: a phase with no history gets a whole expected cold start (600 s,
    test_first_wave.py); `lower: []`: the static 300 s, as before."""
    for text, siblings, due in (("", 0, 620), ("stuck_pod: {adaptive: {lower: []}}", 10, 320)):
        run = make_run(text)
        last = _siblings(run, siblings) if siblings else 0.0
        began = _hung(run, last + 10)
        run.at(T0 + began + 900)
        assert [round(d.at - T0 - began) for d in run.decisions] == [due], text


def test_a_budget_set_for_the_model_is_never_lowered() -> None:
    run = make_run(f"stuck_pod: {{models: {{{MODEL}: {{container_start: 250}}}}}}")
    last = _siblings(run, 10)
    began = _hung(run, last + 10)
    run.at(T0 + began + 900)
    assert [round(d.at - T0 - began) for d in run.decisions] == [270]


def test_slow_siblings_set_a_learned_budget_between_the_floor_and_the_static_one() -> None:
    """Untuned siblings (94 s container and driver start): 1.5 x 94 s x the margin of 10
    samples (1 + 3 x (1/10 - 1/50) = 1.24) = 175 s, under the static 300 s."""
    run = make_run("")
    last = _siblings(run, 10, start=94)
    began = _hung(run, last + 10)
    run.at(T0 + began + 900)
    (d,) = run.decisions
    assert d.at - T0 - began == pytest.approx(1.5 * 94 * (1 + 3 * (1 / 10 - 1 / 50)) + 20)
    assert "adaptive 1.86×P99 of " + MODEL + ", under the static 300s" in d.reason


@settings(max_examples=40, deadline=None)
@given(start=st.floats(1, 119), siblings=st.integers(5, 30))
def test_a_container_start_within_the_floor_is_never_deleted(start: float, siblings: int) -> None:
    """However fast the siblings were, a container that starts within the floor (a fresh
    node's first start with the driver loading) is never taken for a driver hang."""
    run = make_run("")
    last = _siblings(run, siblings)
    began = _hung(run, last + 10)
    started = began + start
    run.at(T0 + started)
    run.feed(pod(**HUNG, created=began - 1, scheduled=began, started=started))
    run.at(T0 + started + 59.5)
    run.feed(pod(**HUNG, created=began - 1, scheduled=began, started=started, ready=started + 60))
    run.at(T0 + began + 3600)
    assert [d for d in run.decisions if d.action == "delete-pod"] == []


def test_lower_names_only_budget_phases() -> None:
    with pytest.raises(ConfigError, match=r"stuck_pod\.adaptive\.lower\[1\].*unknown phase"):
        load_policy("stuck_pod: {adaptive: {lower: [container_start, warmup]}}")


def test_a_container_its_spec_cannot_start_is_told_never_deleted() -> None:
    """CreateContainerConfigError (a Secret or ConfigMap key the spec names is missing):
    every replacement fails the same way, so it is told, once, with what to check."""
    run = make_run("")
    last = _siblings(run, 10)
    run.feed(pod(**HUNG, created=last + 10, scheduled=last + 11,
                 waiting="CreateContainerConfigError"))  # fmt: skip
    run.at(T0 + last + 11 + 3600)
    (d,) = run.decisions
    assert d.action == "notify" and d.target == HUNG["name"]
    assert "CreateContainerConfigError" in d.reason and "cannot help" in d.reason
