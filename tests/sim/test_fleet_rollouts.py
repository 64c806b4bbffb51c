"""A Deployment is scaled while it rolls out, as the Deployment controller does it, even when
the rollout is stuck behind a pod that never becomes Ready.

Before, the simulator skipped every scale event of a Deployment mid-rollout. A policy that left
a hung pod alone (the seed rule with driver hangs) froze its Deployment for the rest of the run:
the replicas the load asked for were never requested, so never counted, and its P99 came out
under the default's (unseen fleet "mixed TP", driver hangs: 482 s against 1,125 s) though it
served less.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace

from remediator.sim.fleet.controllers import NoRemediation
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from remediator.sim.fleet.simulation import Simulation

EVERY_S = 600

SCENARIO = Scenario(
    name="rolling", profile="tuned", duration_s=4 * 3600, seeds=(5,), node_count=8,
    gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),),
    scale=ScaleLoad(EVERY_S, 4, 12), rollout_every_s=1800,
    faults=Faults(driver_hang=0.2),
)  # fmt: skip


def deployment_events(scenario: Scenario) -> list[dict[str, int]]:
    """The Deployment's watch events of a run nobody remediates (hung pods stay)."""
    stream = io.BytesIO()
    Simulation(scenario, scenario.seeds[0], NoRemediation(), record=stream).run()
    out = []
    for line in stream.getvalue().splitlines():
        event = json.loads(line)
        obj = event.get("object", {})
        if obj.get("kind") == "Deployment":
            out.append({"asked": obj["spec"]["replicas"], **obj["status"]})
    return out


def scaled_mid_rollout(events: list[dict[str, int]]) -> list[dict[str, int]]:
    """The events that followed a scale of the Deployment while pods of its old ReplicaSet
    were still there (fewer updated than pods)."""
    return [b for a, b in zip(events, events[1:], strict=False)
            if a["asked"] != b["asked"] and a["updatedReplicas"] != a["replicas"]]  # fmt: skip


def test_a_deployment_scales_while_it_rolls_out() -> None:
    for seed in (5, 6, 7):
        scaled = scaled_mid_rollout(deployment_events(replace(SCENARIO, seeds=(seed,))))
        assert scaled, f"seed {seed}: no scale came mid-rollout"
        # Up or down, it then holds as many pods as asked, of either ReplicaSet, and at most
        # the rollout's surge (25%) more.
        assert all(
            e["asked"] <= e["replicas"] <= e["asked"] + max(1, math.ceil(e["asked"] / 4))
            for e in scaled
        ), (seed, scaled)


def test_a_rollout_stuck_behind_a_hung_pod_still_scales() -> None:
    """Nobody deletes the driver-hung pods, so some rollouts never end: the load's scale
    events are still carried out, every one of them."""
    events = deployment_events(replace(SCENARIO, faults=Faults(driver_hang=0.5)))
    asked = [e["asked"] for e in events]
    changes = sum(1 for a, b in zip(asked, asked[1:], strict=False) if a != b)
    instants = int(SCENARIO.duration_s // EVERY_S) - 1
    assert events[-1]["updatedReplicas"] != events[-1]["replicas"], "no rollout stuck"
    assert changes >= instants, (changes, instants)
