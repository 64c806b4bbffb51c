"""The simulator carries out every action it is given, or refuses it loudly: a decision it
has no model of stops the run with a clear error instead of being dropped (which would score
a policy on an action that never happened)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from remediator.contract.decision import Decision
from remediator.inputs.records import Input
from remediator.sim.fleet.cluster import node_name
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.scenario import DeploymentSpec, Scenario
from remediator.sim.fleet.simulation import Simulation, UnknownSimAction

SCENARIO = Scenario(
    name="apply", profile="tuned", duration_s=600, seeds=(3,), node_count=2, gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 2),),
)  # fmt: skip


class OneDecision:
    """Decides one thing at the first input it sees, then nothing."""

    name = "one-decision"
    wants_inputs = True

    def __init__(self, action: Any) -> None:
        self.action = action
        self.out: list[Decision] = []
        self.done: list[Decision] = []

    def feed(self, item: Input) -> None:
        if not self.done and not self.out and item.at is not None:
            target = node_name(0)
            self.out.append(Decision(self.action, "", target, "test", "inc-1", item.at))

    def advance(self, now: float) -> None:
        return None

    def take(self) -> list[Decision]:
        out, self.out = self.out, []
        self.done += out
        return out

    def applied(self, decision: Decision) -> None:
        return None

    def held(self) -> int:
        return 0

    def next_due(self) -> float | None:
        return None


def test_an_action_the_simulator_has_no_model_of_stops_the_run() -> None:
    with pytest.raises(UnknownSimAction) as err:
        Simulation(SCENARIO, 3, OneDecision("reboot-node")).run()
    text = str(err.value)
    assert "'reboot-node'" in text and "inc-1" in text and "delete-pod" in text


@pytest.mark.parametrize("action", ["notify", "cordon-node", "hedge-pod"])
def test_known_actions_are_carried_out(action: str) -> None:
    ctl = OneDecision(action)
    result = Simulation(SCENARIO, 3, ctl).run()
    assert [d.action for d in ctl.done] == [action]
    assert result.actions[action] == 1


class Warmup(OneDecision):
    """Restarts the warmup DaemonSet for a new image at the first input it sees."""

    IMAGE = "vllm/vllm-openai:v0.7.0"

    def __init__(self) -> None:
        super().__init__("restart-warmup")

    def feed(self, item: Input) -> None:
        if not self.done and not self.out and item.at is not None:
            params = (("image", self.IMAGE),)
            self.out.append(Decision("restart-warmup", "kube-system", "gpu-warmup", "test",
                                     "inc-1", item.at, params=params))  # fmt: skip


def test_the_warmup_pulls_from_the_registry_the_pods_pull_from() -> None:
    """Found by random fleets: with a registry twice as fast, the warmup's pre-pulls took
    the usual time, and the default (which restarts the warmup on a rollout) came out 3 s
    above the seed rule's P99 on a fleet with no hang at all."""
    took = {}
    for slow in (0.5, 1.0, 2.0):
        ctl = Warmup()
        fleet = replace(SCENARIO.with_faults(registry_slow=slow), executor_delay_s=0.0)
        sim = Simulation(fleet, 3, ctl)
        sim.run()
        (decided,) = ctl.done
        took[slow] = [node.images[Warmup.IMAGE] - (decided.at - BASE_TIME) for node in sim.nodes]
    # Each node's pull, p, from the same draw, begins when the decision is carried out:
    # d + 0.5p, d + p and d + 2p.
    pulls = [b - a for a, b in zip(took[1.0], took[2.0], strict=True)]
    halves = [b - a for a, b in zip(took[0.5], took[1.0], strict=True)]
    assert all(p > 1.0 for p in pulls)
    assert pulls == pytest.approx([2 * h for h in halves])
