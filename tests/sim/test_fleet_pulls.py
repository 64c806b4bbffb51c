"""Failing image pulls in the simulator: a pull that fails (a 503 from the registry) fails
once and its retry goes through, and a pod deleted in the middle of its failing pull leaves
nothing behind. Found by random fleets with hedging on: a hedge pod deleted while its pull
was failing left its node "pulling" the image for good, and every pod scheduled there
afterwards waited for a pull that never ended (60 replicas never served in one 6 h run)."""

from __future__ import annotations

from collections import Counter

from remediator.contract.decision import Decision
from remediator.inputs.records import Input, PodEvent
from remediator.sim.fleet.controllers import NoRemediation
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, Scenario
from remediator.sim.fleet.simulation import Simulation

MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def _one_node(replicas: int) -> Scenario:
    """One node of 8 GPUs and one TP-2 Deployment: every pod pulls the same image there."""
    return Scenario(
        name="pulls", profile="tuned", duration_s=900, seeds=(5,), node_count=1, gpus_per_node=8,
        deployments=(DeploymentSpec("vllm-llama-70b", MODEL, replicas),),
        faults=Faults(registry_fail=1.0),  # every pull's first try fails
    )  # fmt: skip


class Watcher(NoRemediation):
    """Counts the kubelet's Failed events per pod; deletes the first pod whose pull fails
    when `delete_first_failing` (as a hedge that lost, or a scale-down, would)."""

    wants_inputs = True

    def __init__(self, delete_first_failing: bool = False) -> None:
        super().__init__("watcher")
        self.failed: Counter[str] = Counter()
        self.delete = delete_first_failing
        self.out: list[Decision] = []

    def feed(self, item: Input) -> None:
        if not isinstance(item, PodEvent) or item.reason not in ("Pulling", "Failed"):
            return
        if item.reason == "Failed":
            self.failed[item.pod] += 1
        elif self.delete and item.at is not None:  # its pull has begun, and will fail
            self.delete = False
            at, uid = item.at, item.pod_uid
            self.out.append(Decision("delete-pod", item.namespace, item.pod, "t", "i", at, uid=uid))

    def take(self) -> list[Decision]:
        out, self.out = self.out, []
        return out


def test_a_failed_pull_fails_once_and_its_retry_goes_through() -> None:
    watcher = Watcher()
    result = Simulation(_one_node(4), 5, watcher).run()
    assert result.censored == 0, "a replica never served: a pull failed for good"
    assert len(result.ready_s) == 4
    # The first pod to pull fails once; the others, waiting on the node for the same
    # image, fail with it and try again; nobody fails twice.
    assert watcher.failed and max(watcher.failed.values()) == 1


def test_a_pod_deleted_mid_failed_pull_leaves_its_node_able_to_pull() -> None:
    watcher = Watcher(delete_first_failing=True)
    result = Simulation(_one_node(4), 5, watcher).run()
    assert result.deletions == 1 and not watcher.delete
    assert result.censored == 0, "the node kept 'pulling' for the deleted pod: pods stranded"
    assert len(result.ready_s) == 4  # the deleted pod's replacement too
