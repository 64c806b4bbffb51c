"""The simulator carries out every action it is given, or refuses it loudly: a decision it
has no model of stops the run with a clear error instead of being dropped (which would score
a policy on an action that never happened)."""

from __future__ import annotations

from typing import Any

import pytest

from remediator.contract.decision import Decision
from remediator.inputs.records import Input
from remediator.sim.fleet.cluster import node_name
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
