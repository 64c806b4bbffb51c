"""Never act on a wrong picture: init containers, finished and terminating pods, back-offs
that ended, and Events that come before their pod (issue 8)."""

from __future__ import annotations

from typing import Any

import pytest

from remediator.inputs.timefmt import format_time
from tests.policy.builders import T0, event, pod
from tests.policy.conftest import RELAXED, Run, make_run
from tests.timeline.real_captures import KSERVE_POD, kserve_events, kserve_pod

NAME = "vllm-70b-7c9d5b6f4-abcde"


# ---- init containers -------------------------------------------------------------------
def _kserve(run: Run) -> Run:
    """The real storage-initializer Events and the pod in PodInitializing, scheduled T0+1."""
    observed = T0 + 53
    return run.feed(kserve_pod(T0, T0 + 1), *kserve_events(observed))


def test_a_weights_download_in_an_init_container_is_not_a_stuck_engine(run: Run) -> None:
    _kserve(run).at(T0 + 1500)  # 25 min: far past engine_init's 60 s and container_start's 300
    assert run.decisions == [] and run.held == []


def test_a_stuck_init_is_told_after_its_own_budget_not_deleted(run: Run) -> None:
    _kserve(run).at(T0 + 1800 + 1 + 20 - 0.1)
    assert run.decisions == []
    run.at(T0 + 4000)
    assert [(d.action, d.target) for d in run.decisions] == [("notify", KSERVE_POD)]
    d = run.decisions[0]
    assert d.at == T0 + 1821  # scheduled + 1800 s budget + 2 more checks
    assert "init for 1820s" in d.reason and "would restart them" in d.reason


def test_init_action_delete_pod_deletes_after_the_init_budget() -> None:
    run = _kserve(make_run(RELAXED + "stuck_pod:\n  init_action: delete-pod\n"))
    run.at(T0 + 4000)
    assert [d.action for d in run.decisions] == ["delete-pod"]


def test_the_policy_names_the_engine_container() -> None:
    """Two containers, no GPUs: the policy says which one is the engine. The queue-proxy
    sidecar started; the engine has not: a stuck container start, deleted."""
    doc = pod(created=0, scheduled=1, waiting="ContainerCreating")
    obj = doc["object"]
    obj["spec"]["containers"] = [{"name": "queue-proxy", "image": "q"},
                                 {"name": "kserve-container", "image": "k"}]  # fmt: skip
    obj["status"]["containerStatuses"] = [
        {"name": "queue-proxy", "restartCount": 0,
         "state": {"running": {"startedAt": format_time(T0 + 5)}}},
        {"name": "kserve-container", "restartCount": 0,
         "state": {"waiting": {"reason": "ContainerCreating"}}},
    ]  # fmt: skip
    engine = "engine_containers: [kserve-container],"
    run = make_run(RELAXED.replace("checks: 3,", f"checks: 3, {engine}"))
    run.feed(doc).at(T0 + 3600)
    assert [(d.action, d.at) for d in run.decisions] == [("delete-pod", T0 + 321)]
    assert "container_start" in run.decisions[0].reason


# ---- pod lifecycle ---------------------------------------------------------------------
def _finished(phase: str | None, deleting: bool) -> dict[str, Any]:
    doc = pod(created=0, scheduled=1, waiting="ContainerCreating")
    if phase is not None:
        doc["object"]["status"]["phase"] = phase
    if deleting:
        doc["object"]["metadata"]["deletionTimestamp"] = format_time(T0 + 30)
    return doc


@pytest.mark.parametrize(
    ("phase", "deleting"), [("Succeeded", False), ("Failed", False), (None, True)]
)
def test_finished_and_terminating_pods_are_never_acted_on(
    run: Run, phase: str | None, deleting: bool
) -> None:
    run.feed(_finished(phase, deleting)).at(T0 + 3600)
    assert run.decisions == [] and run.held == []


def test_a_pod_that_starts_terminating_is_left_alone(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1, started=10))
    run.feed(_finished(None, True) | {"type": "MODIFIED"})
    run.at(T0 + 3600)
    assert run.decisions == []


def test_an_alert_about_a_terminating_pod_is_ignored(run: Run) -> None:
    from tests.policy.builders import alert

    run.feed(_finished(None, True), alert("firing", {"namespace": "llm", "pod": NAME}, 400))
    assert run.decisions == []
    assert [n.reason for n in run.notes] == [f"pod llm/{NAME} is terminating: nothing to do"]


# ---- back-off that ended ---------------------------------------------------------------
def test_a_back_off_that_a_later_pull_ended_does_not_hide_a_stuck_start(run: Run) -> None:
    run.feed(
        pod(created=0, scheduled=1, waiting="ContainerCreating"),
        event("Pulling", 'Pulling image "vllm"', 2),
        event("BackOff", 'Back-off pulling image "vllm"', 40, first=10, count=4),
        event("Pulled", 'Successfully pulled image "vllm" in 20s', 60),
    ).at(T0 + 3600)
    assert [(d.action, d.at) for d in run.decisions] == [("delete-pod", T0 + 380)]
    assert "container_start" in run.decisions[0].reason


# ---- input order -----------------------------------------------------------------------
STUCK = [
    event("Scheduled", "Successfully assigned llm/x to gpu-node-1", 1),
    event("Pulling", 'Pulling image "vllm"', 2),
    event("Pulled", 'Successfully pulled image "vllm" in 20s', 22),
    pod(created=0, scheduled=1, waiting="ContainerCreating"),
]


@pytest.mark.parametrize("order", [STUCK, STUCK[::-1], STUCK[1:] + STUCK[:1]])
def test_events_before_their_pod_arm_the_same_timer(order: list[dict[str, Any]]) -> None:
    run = make_run(RELAXED).feed(*order).at(T0 + 3600)
    assert [(d.action, d.at) for d in run.decisions] == [("delete-pod", T0 + 342)]


def test_a_held_decision_is_never_printed_twice_at_one_instant() -> None:
    """container_start, then a second pull (image_pull), then container_start again: the
    first phase's timer re-arms on the later evidence, and so does the change; one timer
    must stand, or min_age holds the same decision twice at the same instant."""
    # min_age at its default holds; the static budgets (no floor for want of history).
    run = make_run("stuck_pod:\n  checks: 1\n  adaptive: {enabled: false}\n")
    run.feed(
        pod(created=0, scheduled=1, waiting="ContainerCreating"),
        event("Pulling", 'Pulling image "vllm"', 2, name="p1"),
        event("Pulled", 'Successfully pulled image "vllm" in 8s', 10, name="p2"),
        event("Pulling", 'Pulling image "vllm"', 20, name="p3"),
        event("Pulled", 'Successfully pulled image "vllm" in 20s', 40, name="p4"),
    ).at(T0 + 400)
    seen = [(h.decision.at, h.decision.incident, h.guardrail) for h in run.held]
    assert seen and len(seen) == len(set(seen))
