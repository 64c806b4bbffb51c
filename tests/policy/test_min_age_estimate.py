"""min_age waits for the expected cold start as it is now, not as it was at the first hold.

Found in the simulator (docs/simulation.md): on an untuned fleet with driver hangs, a pod the
learned container-start budget judged at 231 s of age was held by min_age until it was as old
as its model's expected cold start *estimated at that first hold* (599 s), though the fleet's
cold starts had since brought the estimate down. Now a finished cold start that lowers the
estimate has each pod held by the old one looked at again: when the new one lets it go, and
never sooner than a check interval after the news (`Guard.reweigh`, in one process and in the
guard over Kafka partitions alike: tests/streams/test_cores.py).

The fleet: five siblings whose cold starts took 500 s, then a pod whose container never starts
(a GPU driver hang: the learned container-start budget, at its 120 s floor, finds it), then
five siblings that take 200 s. A window of 5 cold starts, so the estimate (the P99 of the
window: its slowest) drops from 500 s to 200 s the moment the fifth fast one is Ready.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run

POLICY = "stuck_pod: {adaptive: {window: 5}}"
HUNG = dict(name="vllm-70b-7c9d5b6f4-hung0", uid="aaaaaaaa-0000-0000-0000-0000000000ff")
HUNG_AT = 910.0  # created; scheduled a second later, its container never starts


def _sibling(run: Run, i: int, created: float, total: float) -> None:
    run.feed(sibling(i, created, total))


def sibling(i: int, created: float, total: float) -> dict[str, Any]:
    return pod(f"vllm-70b-7c9d5b6f4-s{i:03d}", f"bbbbbbbb-0000-0000-0000-{i:012d}",
               created=created, scheduled=created + 1, started=created + 4,
               ready=created + total)  # fmt: skip


def fleet(
    feed: Callable[[dict[str, Any]], object], at: Callable[[float], object], fast: list[float]
) -> None:
    """Slow siblings Ready by 900 s, the hung pod (seen at 920 s), then fast siblings
    created at `fast`: each sibling seen once, at its Ready, and the clock moved every 10 s
    and to each of those times, before what happened then is fed (`feed` a watch event,
    `at` a time on the clock): one process and Kafka partitions see the same times."""
    seen = [(500.0 + i * 100.0, sibling(i, i * 100.0, 500.0)) for i in range(5)]
    seen.append(
        (
            HUNG_AT + 10,
            pod(**HUNG, created=HUNG_AT, scheduled=HUNG_AT + 1, waiting="ContainerCreating"),
        )  # fmt: skip
    )
    seen += [(c + 200.0, sibling(5 + j, c, 200.0)) for j, c in enumerate(sorted(fast))]
    grid = (float(t) for t in range(0, int(HUNG_AT) + 3600, 10))
    for now in sorted({*grid, *(t for t, _ in seen)}):
        at(T0 + now)
        for doc in (doc for t, doc in seen if t == now):
            feed(doc)


def _fleet(run: Run, fast: list[float]) -> None:
    fleet(run.feed, run.at, fast)


def _deleted(run: Run) -> list[Decision]:
    return [d for d in run.decisions if d.action == "delete-pod" and d.target == HUNG["name"]]


def test_a_pod_held_until_old_enough_goes_when_the_estimate_drops() -> None:
    run = make_run(POLICY)
    _fleet(run, [920.0, 930.0, 940.0, 950.0, 960.0])  # the fifth fast one Ready at 1160 s
    held = [h for h in run.held if h.decision.target == HUNG["name"]]
    assert held and held[0].guardrail == "min_age" and held[0].decision.at == T0 + 1051
    assert held[0].retry_at == T0 + HUNG_AT + 500  # as old as the slow siblings took
    (d,) = _deleted(run)
    # The estimate dropped to 200 s at 1160 s; the pod (250 s old) is looked at again a
    # check interval (30 s) after the news, not at 1410 s.
    assert d.at == T0 + 1160 + 30
    assert "container_start" in d.reason


def test_a_drop_that_still_leaves_the_pod_young_waits_for_the_new_estimate() -> None:
    """Fast siblings finish early: the pod is looked at when it is as old as the new
    estimate (910 + 200 s), not at once."""
    run = make_run(POLICY)
    for i in range(5):
        _sibling(run, i, i * 100.0, 500.0)
    run.feed(pod(**HUNG, created=HUNG_AT, scheduled=HUNG_AT + 1, waiting="ContainerCreating"))
    run.at(T0 + HUNG_AT + 141)  # judged by the 120 s floor and its checks: held to 1410 s
    for j in range(5):
        _sibling(run, 5 + j, 850.0 + j, 200.0)  # Ready at 1050-1054 s, fed late (1052 s)
    run.at(T0 + HUNG_AT + 3600)
    (d,) = _deleted(run)
    assert d.at == T0 + HUNG_AT + 200  # (the news came at 1054 s: 30 s later is sooner)
    assert [h.guardrail for h in run.held] == ["min_age"]  # and its first hold's look is gone


@settings(max_examples=30, deadline=None)
@given(fast=st.lists(st.floats(915.0, 1150.0), min_size=0, max_size=8))
def test_never_before_old_enough_and_never_later_than_the_first_hold(fast: list[float]) -> None:
    """Whenever the fast siblings come: the pod is deleted no younger than the estimate at
    its deletion, and no later than the first hold's end (asked again then, as before)."""
    run = make_run(POLICY)
    _fleet(run, fast)
    (d,) = _deleted(run)
    assert d.expected_cold_start_s is not None and d.pod_created_at is not None
    assert d.at >= d.pod_created_at + d.expected_cold_start_s
    assert d.at <= T0 + HUNG_AT + 500
