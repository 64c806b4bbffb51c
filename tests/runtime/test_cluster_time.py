"""Budgets are measured on one clock (issue 10, #5): the cluster's, as its inputs show it,
carried on by the local monotonic clock. A step of the local wall clock by an hour, either
way, neither deletes a healthy pod nor hides a stuck one."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from remediator.contract.decision import Decision
from remediator.inputs.decode import normalize
from remediator.runtime.clock import ClusterTime, VirtualClock
from tests.runtime.test_virtual_clock import T0, Argo, Rig, iso, pod, slack_ok

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


def deleted_at(name: str, asked: float, grace: float = 30.0) -> dict[str, Any]:
    """The pod as its graceful deletion shows it: the API server set deletionTimestamp to the
    moment it was asked plus the grace period, and wrote no managedFields entry for it."""
    doc = copy.deepcopy(pod(name, started=T0))
    doc["metadata"]["deletionTimestamp"] = iso(asked + grace)
    doc["metadata"]["deletionGracePeriodSeconds"] = int(grace)
    return doc


async def test_a_pod_deleted_after_its_budget_lapsed_is_judged_at_the_budgets_end() -> None:
    """The live dry-run differential: serve's estimate of the cluster's time trails it by up
    to a second (whole-second stamps, then delivery), so a pod deleted just after its budget
    lapsed (by a rollout, by the other serve's action) could be gone from one process's
    picture before its timer fired there and judged in the other. The deletion's request is
    the API server's time: it moves the clock first, and the timer due before it fires."""
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_pods_in_engine_init(rig)
    await rig.clock.advance(296)  # T0 + 299 on the estimate: one second short of the budget
    rig.driver.tick()
    assert decided(rig) == []
    rig.feed(deleted_at("vllm-0", asked=T0 + 300))  # asked the moment the budget lapsed
    found = decided(rig)
    assert sorted(d.target for d in found) == PODS  # vllm-0 too: stuck before it was deleted
    assert {(d.action, d.at) for d in found} == {("delete-pod", T0 + 300)}


async def test_a_pod_deleted_before_its_budget_lapsed_is_not_judged() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_pods_in_engine_init(rig)
    await rig.clock.advance(290)
    rig.feed(deleted_at("vllm-0", asked=T0 + 299))  # a second before its budget's end
    assert decided(rig) == []
    await rig.clock.advance(10)
    rig.driver.tick()
    assert sorted(d.target for d in decided(rig)) == PODS[1:]


# --- issue 18 #1: one node's clock never moves another node's budgets -------------------------


def on_node(name: str, node: str, started: float, skew: float = 0.0) -> dict[str, Any]:
    """A pod in engine init on `node`, whose kubelet clock is `skew` seconds off: its status
    stamps are the node's; its creation, scheduling and the write are the API server's."""
    doc = copy.deepcopy(pod(name, started=started))
    doc["spec"]["nodeName"] = node
    doc["metadata"]["uid"] = f"00000000-0000-4000-8000-{abs(hash((name, node))) % 10**12:012d}"
    status = doc["status"]
    for cond in status["conditions"]:
        if cond["type"] != "PodScheduled":
            cond["lastTransitionTime"] = iso(started - 5 + skew)
    status["containerStatuses"][0]["state"]["running"]["startedAt"] = iso(started + skew)
    return doc


HEALTHY = [f"ok-{i}" for i in range(5)]
SKEWED = [f"skewed-{i}" for i in range(5)]


async def five_and_five(rig: Rig, skew: float) -> None:
    """Five pods on a good node and five on one whose kubelet clock is `skew` off, all
    started at T0 (on the API server's clock), 300 s engine-init budget."""
    for name in HEALTHY:
        rig.feed(on_node(name, "gpu-good", T0))
    for name in SKEWED:
        rig.feed(on_node(name, "gpu-skewed", T0, skew))


@pytest.mark.parametrize("skew", [HOUR, -HOUR])
async def test_one_nodes_clock_moves_no_other_nodes_budgets(skew: float) -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_and_five(rig, skew)
    for _ in range(20):  # 20 s: the pods are 20 s into a 300 s budget, on every node
        await rig.clock.advance(1)
        rig.driver.tick()
    assert decided(rig) == [] and rig.session.now <= T0 + 21
    assert rig.session.tracker.node_skew == {"gpu-skewed": pytest.approx(skew, abs=6)}
    # Every pod is still found once its budget lapses, the skewed node's on corrected times.
    await rig.clock.advance(282)
    rig.driver.tick()
    found = decided(rig)
    assert sorted(d.target for d in found) == sorted(HEALTHY + SKEWED)
    assert {d.at for d in found} <= {T0 + 300, T0 + 301}
    notes = {d.target: "gpu-skewed's clock runs 3600s" in d.reason for d in found}
    assert notes == {name: name in SKEWED for name in HEALTHY + SKEWED}


async def test_a_webhook_event_stamped_an_hour_ahead_moves_no_clock() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await five_pods_in_engine_init(rig)
    ahead = iso(T0 + HOUR)
    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "x.1", "namespace": "llm", "creationTimestamp": ahead},
        "involvedObject": {"kind": "Pod", "namespace": "llm", "name": "vllm-0"},
        "reason": "Started",
        "message": "Started container vllm",
        "firstTimestamp": ahead,
        "lastTimestamp": ahead,
    }
    rig.driver.feed(normalize(orjson.loads(orjson.dumps(event))), watched=False)
    rig.driver.tick()
    assert rig.session.now == T0 + 3 and decided(rig) == []
    assert rig.session.tracker.node_skew == {}
