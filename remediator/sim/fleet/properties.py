"""The two properties a default policy must keep, as probes the defaults search runs on
every candidate (tests check them on their own scenarios too).

1. A pod hung in engine init whose sibling of the same model is already Ready is deleted
   when its budget and checks are spent, not at a fixed age.
2. A budget below the model's real cold start never becomes a kill loop (the results'
   `kill_loops`, checked on every scenario of the search).
"""

from __future__ import annotations

from remediator.contract.decision import Decision
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, Scenario
from remediator.sim.fleet.simulation import Simulation

SIBLING = Scenario(
    name="one-hung-one-healthy", profile="tuned", duration_s=900, seeds=(11,), node_count=2,
    gpus_per_node=8, faults=Faults(hang_first=1),
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 2),),
)  # fmt: skip


def hung_pod_lateness(config: PolicyFile, scenario: Scenario = SIBLING) -> float | None:
    """Seconds between the hung pod's deletion decision and its budget plus checks running
    out (engine init start + budget + (checks-1) × interval); None if it was never deleted."""
    seen: dict[str, float] = {}

    def watch(what: str, now: float, obj: object) -> None:
        if what == "started" and getattr(obj, "fate", "") == "init_hang":
            seen["started"] = now
        elif what == "decision" and isinstance(obj, Decision) and obj.action == "delete-pod":
            seen.setdefault("decided", obj.at - BASE_TIME)

    Simulation(scenario, scenario.seeds[0], CorePolicy("probe", config), observer=watch).run()
    if "decided" not in seen:
        return None
    cfg = config.rules.stuck_pod
    allowance = cfg.budgets["engine_init"] + (cfg.checks - 1) * cfg.check_interval_s
    return seen["decided"] - (seen["started"] + allowance)
