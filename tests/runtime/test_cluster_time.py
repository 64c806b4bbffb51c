"""Budgets are measured on one clock (issue 10, #5): the cluster's, as its inputs show it,
carried on by the local monotonic clock. A step of the local wall clock by an hour, either
way, neither deletes a healthy pod nor hides a stuck one."""

from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.runtime.clock import ClusterTime, VirtualClock
from tests.runtime.test_virtual_clock import T0, Argo, Rig, pod, slack_ok

HOUR = 3600.0
POLICY = """
stuck_pod:
  budgets: {engine_init: 300}
  checks: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
guardrails:
  rate_limit: {per_minute: 600, burst: 100}
"""
PODS = [f"vllm-{i}" for i in range(5)]


def decided(rig: Rig) -> list[Decision]:
    return [r.decision for r in rig.outbox.rows()]


async def five_pods_in_engine_init(rig: Rig) -> None:
    for name in PODS:
        rig.feed(pod(name, started=T0))  # stamped by the cluster at T0
    await rig.clock.advance(3)  # 3 s into their 300 s budget
    rig.driver.tick()
    assert decided(rig) == []


@pytest.mark.parametrize("step", [HOUR, -HOUR])
async def test_a_local_clock_step_neither_deletes_healthy_pods_nor_hides_stuck_ones(
    step: float,
) -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_pods_in_engine_init(rig)
    rig.clock.step_wall(step)
    rig.driver.tick()
    assert decided(rig) == [] and rig.session.now < T0 + 300  # healthy: nothing deleted
    await rig.clock.advance(296)  # 299 s of their budget on the monotonic clock
    rig.driver.tick()
    assert decided(rig) == []
    await rig.clock.advance(2)  # the budget lapsed: every stuck pod is found, on time
    rig.driver.tick()
    found = decided(rig)
    assert sorted(d.target for d in found) == PODS
    assert {(d.action, d.at) for d in found} == {("delete-pod", T0 + 300)}


async def test_an_input_without_a_cluster_stamp_is_judged_on_the_cluster_clock() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_pods_in_engine_init(rig)
    rig.clock.step_wall(HOUR)
    rig.feed(
        {"kind": "FirstToken", "namespace": "llm", "pod": "vllm-0", "time": "2000-01-01T00:00:00Z"}
    )
    assert rig.session.now == T0 + 3 and decided(rig) == []


async def test_cluster_time_follows_the_newest_observation_on_the_monotonic_clock() -> None:
    local = VirtualClock(T0)
    cluster = ClusterTime(local)
    assert not cluster.known and cluster.now() == T0  # nothing observed: local wall time
    cluster.observe(T0 - 50)  # the first observation sets it, even behind the local clock
    assert cluster.known and cluster.now() == T0 - 50
    await local.advance(10)
    local.step_wall(-HOUR)
    assert cluster.now() == T0 - 40
    cluster.observe(T0 - 45)  # older than the estimate (a relist, a late event): no change
    assert cluster.now() == T0 - 40
    cluster.observe(T0 - 30)  # newer: moves it on
    await local.advance(5)
    assert cluster.now() == T0 - 25
    cluster.observe(None)
    assert cluster.now() == T0 - 25


async def test_a_local_clock_wrong_at_start_does_not_run_the_session_ahead() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    rig.clock.step_wall(HOUR)  # an hour ahead before anything came in
    rig.driver.tick()  # the timer ticks before the first list arrives
    await five_pods_in_engine_init(rig)
    assert rig.session.now == T0 + 3
