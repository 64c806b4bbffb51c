"""Step-level hangs in the fleet simulator: a hung engine's log shows the steps before the one
it hangs in, and the real core, following the logs, finds it by that step before its phase
budget would have."""

from __future__ import annotations

from remediator.contract.decision import Decision
from remediator.inputs.records import Input
from remediator.policy_file import PolicyFile, load_policy
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from remediator.sim.fleet.simulation import Simulation
from remediator.sim.fleet.steps import LOGGED

FLEET = Scenario(
    name="step-hangs", profile="tuned", duration_s=2 * 3600, seeds=(3,), node_count=8,
    gpus_per_node=8, scale=ScaleLoad(600, 4, 16), faults=Faults(engine_init_hang=0.2),
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),),
)  # fmt: skip
# Guardrails wide open: every hung pod is decided on, so each step's hangs show.
PROGRESS = """
stuck_pod:
  progress: {enabled: true, floor_s: 15}
engine_logs: {follow: true, max_pods: 64}
guardrails:
  cooldown: {seconds: 0}
  blast_radius: {max_pods: 1000, max_percent: 100, max_pods_cluster: 1000}
  rate_limit: {per_minute: 1000, burst: 1000}
"""


def _run(config: PolicyFile) -> tuple[dict[str, Pod], dict[str, Decision]]:
    pods: dict[str, Pod] = {}
    decided: dict[str, Decision] = {}

    def watch(what: str, now: float, obj: object) -> None:
        if what == "started" and isinstance(obj, Pod):
            pods[obj.uid] = obj
        elif what == "decision" and isinstance(obj, Decision) and obj.uid:
            decided.setdefault(obj.uid, obj)

    Simulation(FLEET, FLEET.seeds[0], CorePolicy("c", config), observer=watch).run()
    return pods, decided


def test_hung_engines_are_found_by_the_step_they_hang_in() -> None:
    config = load_policy(PROGRESS)
    stuck = config.rules.stuck_pod
    pods, decided = _run(config)
    by_step: dict[str, int] = {}
    for uid, pod in pods.items():
        d = decided.get(uid)
        if pod.fate != "init_hang" or d is None or d.action != "delete-pod":
            continue
        assert pod.started is not None and pod.hang_at is not None
        hung_in = LOGGED[len(pod.lines)]
        by_step[hung_in] = by_step.get(hung_in, 0) + 1
        phase_due = pod.started + stuck.budgets["engine_init"]
        if hung_in == "weights":  # NCCL init: no step line, the phase budget finds it
            assert "stalled in vLLM step" not in d.reason
            continue
        named = "torch_compile" if hung_in == "torch_compile" else "kv_cache (timed as cuda_graphs)"
        assert f"stalled in vLLM step {named}" in d.reason, d.reason
        assert d.at - BASE_TIME < phase_due + (stuck.checks - 1) * stuck.check_interval_s
    assert set(by_step) == {"weights", "torch_compile", "cuda_graphs"}
    assert all(n >= 3 for n in by_step.values()), by_step


def test_healthy_pods_log_every_step_and_are_never_deleted() -> None:
    pods, decided = _run(load_policy(PROGRESS))
    healthy = [p for p in pods.values() if p.fate == "ok" and not p.node.unsettled]  # type: ignore[union-attr]
    assert len(healthy) > 50
    for pod in healthy:
        assert len(pod.lines) == len(LOGGED)
        assert pod.would_ready is not None and pod.started is not None
        assert pod.started + pod.lines[-1] < pod.would_ready
        d = decided.get(pod.uid)
        assert d is None or d.action != "delete-pod", d


class Counting(CorePolicy):
    """The real core, noting the kinds of input it is fed."""

    def __init__(self, config: PolicyFile) -> None:
        super().__init__("counting", config)
        self.kinds: dict[str, int] = {}

    def feed(self, item: Input) -> None:
        name = type(item).__name__
        self.kinds[name] = self.kinds.get(name, 0) + 1
        super().feed(item)


def test_step_lines_reach_the_core_only_through_its_log_follower() -> None:
    unfollowed = Counting(load_policy("engine_logs: {follow: false}"))
    followed = Counting(load_policy(PROGRESS))
    for ctl in (followed, unfollowed):
        Simulation(FLEET, FLEET.seeds[0], ctl).run()
    assert "EngineStep" not in unfollowed.kinds
    assert followed.kinds["EngineStep"] > 5 * 50
