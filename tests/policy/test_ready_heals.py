"""A deletion stops counting against its workload's blast radius once a pod of the workload
created after it is Ready: the engine tells the guard which of the workload's pods became
Ready, by creation time (`Decision.ready_created`), and the guard matches them
(tests/guard/test_blast_radius.py). Through the whole core: one Session, its guard included."""

from __future__ import annotations

from tests.policy.builders import T0, deployment, pod
from tests.policy.conftest import RELAXED, Run, make_run

# Cap 1 (25% of the Deployment's 4 replicas), counted for the whole window.
POLICY = RELAXED + "  blast_radius: {max_percent: 25, cold_starts: 0, window_s: 600}\n"
A, UID_A = "vllm-70b-7c9d5b6f4-aaaaa", "aaaaaaaa-2222-3333-4444-555555555555"
B, UID_B = "vllm-70b-7c9d5b6f4-bbbbb", "bbbbbbbb-2222-3333-4444-555555555555"
C, UID_C = "vllm-70b-7c9d5b6f4-ccccc", "cccccccc-2222-3333-4444-555555555555"


def _two_stuck(ready_after: float | None) -> tuple[Run, float]:
    """A and B stuck in engine init; A is deleted first (B held by the cap), and its
    replacement C is Ready `ready_after` seconds after it is created (None: never).
    When A was deleted."""
    run = make_run(POLICY)
    run.feed(deployment("vllm/vllm-openai:v0.6.3", watch="ADDED", ready=0))
    run.feed(pod(A, UID_A, watch="ADDED", created=0, scheduled=1, started=10))
    run.feed(pod(B, UID_B, watch="ADDED", created=5, scheduled=6, started=15))
    for s in range(11, 400):
        run.at(T0 + s)
        if run.decisions:
            break
    (first,) = run.decisions
    assert (first.action, first.target) == ("delete-pod", A)
    run.at(first.at + 10)
    assert len(run.decisions) == 1
    assert any(h.decision.target == B and h.guardrail == "blast_radius" for h in run.held)
    deleted = first.at - T0
    run.feed(pod(A, UID_A, created=0, scheduled=1, started=10, watch="DELETED"))
    created = deleted + 2
    ready = None if ready_after is None else created + ready_after
    run.feed(pod(C, UID_C, watch="ADDED", created=created, scheduled=created + 1,
                 started=created + 3))  # fmt: skip
    if ready is not None:
        run.at(T0 + ready - 1)
        run.feed(pod(C, UID_C, created=created, scheduled=created + 1, started=created + 3,
                     ready=ready))  # fmt: skip
    run.at(T0 + deleted + 700)
    return run, deleted


def test_a_second_stuck_pod_goes_once_the_first_s_replacement_is_ready() -> None:
    run, deleted = _two_stuck(ready_after=40)
    second = [d for d in run.decisions if d.target == B]
    assert [d.action for d in second] == ["delete-pod"]
    assert second[0].ready_created == (T0 + deleted + 2,)
    # at its next look after C got Ready, not when A's deletion left the window
    assert second[0].at - T0 < deleted + 2 + 40 + 60


def test_without_a_ready_replacement_the_second_waits_out_the_window() -> None:
    run, deleted = _two_stuck(ready_after=None)
    second = [d for d in run.decisions if d.target == B]
    assert [d.action for d in second] == ["delete-pod"]
    assert second[0].ready_created == ()
    assert second[0].at - T0 >= deleted + 600
