"""The simulator's results do not move when its code is made faster: seeded runs (no
remediation and the seed's rule, which the simulator alone decides) give the summary and the
exact bytes of the recorded stream that the simulator gave when these figures were taken; and
the real core (`core`: a policy written out in full, progress-aware detection and its log
follower on) makes the same decisions, at the same times, for the same reasons, when the core
is made faster.

A change to the simulation's model (new faults, new draws) changes them on purpose; then
re-record with `python -m tests.sim.test_fleet_golden` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from typing import Any

from remediator.contract.decision import Decision
from remediator.policy_file import load_policy
from remediator.sim.fleet.controllers import Controller, CorePolicy, NoRemediation, SeedRule
from remediator.sim.fleet.results import summarize
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario, Shortage
from remediator.sim.fleet.simulation import Simulation

SCENARIO = Scenario(
    name="golden", profile="tuned", duration_s=3600, seeds=(7,), node_count=6, gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),
                 DeploymentSpec("vllm-qwen-72b", "Qwen/Qwen2.5-72B-Instruct", 4)),
    scale=ScaleLoad(600, 4, 12), rollout_every_s=1800,
    faults=Faults(engine_init_hang=0.1, driver_hang=0.05, registry_fail=0.1,
                  unsettled_gpu_nodes=1, gpu_shortage=Shortage(2000, 2, 600)),
)  # fmt: skip

# Recorded before the simulator's speed work (issue 20), from the code of that time; `core`
# before the core's (the engine's step lines modelled, the core unchanged); `core` again when
# the engine's banner and "Starting to load model" were modelled (NCCL init judged by progress);
# `core` again when the stretch before the first step line got 1.5 times the factor
# (policy/stall.py FIRST_STRETCH_MARGIN: the same 24 deletions, none false, at other times);
# all three again when a failed image pull was made to fail once and to strand nobody
# (tests/sim/test_fleet_pulls.py: before, a pull failed on every retry, and the node's other
# pods that needed the image waited for it for good); `core` again when limits set from few
# siblings' times were widened (policy.history.few_samples_margin: 37 deletions, none false);
# `core` again when the container-start budget was learned downwards to its 120 s floor
# (adaptive.lower: the driver-hung pods' deletions name the floor, one goes sooner; the same
# 37 deletions, none false, and the same times to Ready); `core` again when an unsettled
# node's notice said what to do with cordoning off (its reason only); `core` again when the
# deletion of a pod hung on a node verified unsettled stopped counting against blast_radius
# (116 deletions against 37, the new ones all of pods hung on that node, none false; 165
# holds against 551; 15 replicas never Ready against 24; time to Ready summed 20,750 s
# against 25,475 s). `core hedged`, the same policy with hedged starts on, recorded when they
# became the default (one hedge let through, 262 holds, most of them hedges the budget held).
# `core` and `core hedged` again when cordoning became the default (gpu_memory.cordon: the
# fleet's one unsettled node cordoned at its verdict): 12 deletions against 116, 84 cold
# starts against 180, 205 GPU-minutes against 580, 13 replicas never Ready against 15; but in
# this six-node fleet with no spare GPU, the replicas the cordon displaced wait for room ahead
# of the rollouts after them (P50 95 s against 47; docs/simulation.md). No hedge is let
# through now: the one before was of a pod on that node.
# All four streams again when the Deployment's watch said how far a rollout got (status.replicas
# and updatedReplicas: pods of every ReplicaSet and of the current one), so no hedge is decided
# for a Deployment rolling out (the step refuses it): `core hedged` holds one decision fewer.
# All four again when the simulator scaled a Deployment mid-rollout (it skipped the load's scale
# events while any rollout ran, so a rollout stuck behind a pod nobody deleted froze its
# Deployment, and the replicas the load asked for were never counted;
# tests/sim/test_fleet_rollouts.py): `core` 93 replicas against 72, 112 cold starts against 84,
# 19 deletions against 12, none false; P50 47 s against 95 (the wait the cordon was blamed for
# above was mostly this); the seed rule 91 replicas against 87. `core` and `core hedged`'s
# decisions again when a first-wave pod past its budget was judged by its own pace
# (tests/policy/test_own_pace.py): the same deletions at the same times, five of their
# reasons now saying how long the pod's log had been silent against its pace. `core` and
# `core hedged` again when blast_radius counted a replica once (a stalled replacement's deletion
# goes on from its pod's): `core` 18 deletions against 19, none false, 67 holds against 71, 94
# replicas against 93, time to Ready summed 18,815 s against 19,674 s (max 1,200 s against
# 1,500); `core hedged` one hedge let through, 17 deletions, none false. `core` and `core
# hedged` again when a pod whose log is read and whose stretch no sibling had timed was looked
# at again each check (policy/engine.py, `_deadline`'s `look_again`), so it is judged by its
# siblings' steps at the first check after they are learned, not when its budget's timer
# fires: the same deletions, sooner (time to Ready summed 17 s less), the same holds.
# `core hedged`'s stream again when the hedge step's annotation named the pod racing the
# stalled one (inputs/hedge_annotation.py): one more watch event of the hedged Deployment, the
# same decisions. `core` again when a node's pace was learned from each step a pod ends and
# counted after the pod's first step too (policy/pace.py): the same 18 deletions, none false,
# 66 holds against 67, time to Ready summed 12 s less. `core hedged`'s stream again when the
# hedge step's annotation became a list, one entry per hedge running (a Deployment's stalled pods
# hedged at once): the same bytes but for that annotation, the same decisions. `core hedged`
# again when no hedge went while any workload was short of GPUs (guard/hedge_budget.py): in
# this fleet with no spare GPU its one hedge is held, and that pod deleted when hung instead
# (18 deletions against 17, none false, 74 holds against 72; time to Ready summed 88 s more).
# `core` and `core hedged` again when a deletion stopped counting against blast_radius once a
# pod of its workload created after it was Ready (Decision.ready_created): the same 18
# deletions, none false, sooner; 31 holds against 66 (39 against 74 hedged); time to Ready
# summed 17,715 s against 18,786; P95 600 s against 756 s. `core hedged` again when the hedge
# budget was paid by every cold start's GPUs (a pod deleted unready held them too) and a
# settled hedge was charged what it held, more or less than its reservation
# (guard/hedge_budget.py): one hedge let through, 17 deletions against 18, none false; time to
# Ready summed 17,612 s against 17,714. `core hedged`'s stream again when the hedge step's
# annotation said when its racer was scheduled (`racing_since`): the same decisions.
EXPECTED: dict[str, dict[str, Any]] = {
    "core": {
        "decisions": 29,
        "decisions_sha256": "7f769eebb45b0577ab032d08dbb402413ba94ccac1fef2a4f97e378d26379b6f",
        "ready_s_sum": 17714.546999,
        "stream_lines": 1397,
        "stream_sha256": "aa60d56c24e0e1d07dfb3888704a5a9becff130041611ad5a5798df023178545",
        "summary": {
            "actions": {
                "cordon-node": 1,
                "delete-pod": 18,
                "notify": 5,
                "restart-warmup": 4,
                "verify-gpu-memory": 1,
            },
            "censored": 17,
            "cold_starts": 111,
            "deletions": 18,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1200.0,
                "p50": 46.63847756283246,
                "p95": 600.0,
                "p99": 1200.0,
                "spread": 1153.3615224371674,
            },
            "gpu_minutes": 197.80065825949356,
            "hedge_gpu_minutes": 0.0,
            "hedges": 0,
            "held": 31,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "core",
            "ready": {
                "max": 1200.0,
                "p50": 45.57210610568279,
                "p95": 600.0,
                "p99": 1200.0,
                "spread": 1154.427893894317,
            },
            "replicas": 93,
            "scenario": "golden",
        },
    },
    "core hedged": {
        "decisions": 29,
        "decisions_sha256": "0934a6a82988013714a3b95f7bb381ce01332cad6104853b29d7a703b0d8eafa",
        "ready_s_sum": 17612.341054,
        "stream_lines": 1397,
        "stream_sha256": "b2c1d31899685c181667cb52c079834a8040f06680f21b7dd8ba8905a42b2b9f",
        "summary": {
            "actions": {
                "cordon-node": 1,
                "delete-pod": 17,
                "hedge-pod": 1,
                "notify": 5,
                "restart-warmup": 4,
                "verify-gpu-memory": 1,
            },
            "censored": 17,
            "cold_starts": 111,
            "deletions": 17,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1200.0,
                "p50": 45.404512877015804,
                "p95": 600.0,
                "p99": 1200.0,
                "spread": 1154.5954871229842,
            },
            "gpu_minutes": 195.75357114370132,
            "hedge_gpu_minutes": 1.3326698218822608,
            "hedges": 1,
            "held": 39,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "core hedged",
            "ready": {
                "max": 1200.0,
                "p50": 44.29547892218318,
                "p95": 600.0,
                "p99": 1200.0,
                "spread": 1155.704521077817,
            },
            "replicas": 93,
            "scenario": "golden",
        },
    },
    "none": {
        "decisions": 0,
        "decisions_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ready_s_sum": 25381.866039,
        "stream_lines": 647,
        "stream_sha256": "8b2f6cc58e3c8f6b50bda6a54756d8efe9625d981e3a302d50130bd2e71e794a",
        "summary": {
            "actions": {},
            "censored": 30,
            "cold_starts": 94,
            "deletions": 0,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1800.0,
                "p50": 45.022765693946894,
                "p95": 1500.0,
                "p99": 1800.0,
                "spread": 1754.977234306053,
            },
            "gpu_minutes": 763.2612196890302,
            "hedge_gpu_minutes": 0.0,
            "hedges": 0,
            "held": 0,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "none",
            "ready": {
                "max": 1800.0,
                "p50": 43.27931771918793,
                "p95": 1500.0,
                "p99": 1800.0,
                "spread": 1756.720682280812,
            },
            "replicas": 94,
            "scenario": "golden",
        },
    },
    "seed-rule": {
        "decisions": 109,
        "decisions_sha256": "12b9b7885e7d9b43d4af67bba9fa9a344b67a6a1b809478f6935ca9f0e6f7ba1",
        "ready_s_sum": 21762.542258,
        "stream_lines": 1180,
        "stream_sha256": "b4bdc18fc3a66df860bc3276f54b7981e74a8cebaeae3d0440e7b799389d0332",
        "summary": {
            "actions": {"delete-pod": 109},
            "censored": 22,
            "cold_starts": 199,
            "deletions": 108,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1800.0,
                "p50": 46.63847756283246,
                "p95": 1304.6087161694632,
                "p99": 1800.0,
                "spread": 1753.3615224371674,
            },
            "gpu_minutes": 639.3201428661491,
            "hedge_gpu_minutes": 0.0,
            "hedges": 0,
            "held": 0,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "seed-rule",
            "ready": {
                "max": 1800.0,
                "p50": 45.36845160132634,
                "p95": 1304.6087161694632,
                "p99": 1800.0,
                "spread": 1754.6315483986737,
            },
            "replicas": 91,
            "scenario": "golden",
        },
    },
}


# Every knob the defaults search moves, written out: the defaults may change, this may not.
CORE = """
stuck_pod:
  budgets: {engine_init: 60}
  checks: 3
  check_interval_s: 10
  expected_cold_start_s: 600
  adaptive: {enabled: true, factor: 1.5, min_samples: 5, min_siblings: 1, window: 50}
  progress: {enabled: true, factor: 3, quantile: 0.95, floor_s: 15, min_samples: 5}
  hedge: {enabled: false, at: 0.5}
engine_logs: {follow: true, max_pods: 8}
guardrails:
  min_age: {factor: 1, stalled: true}
  cooldown: {seconds: 30}
  blast_radius: {max_pods: 5, max_percent: 25, max_pods_cluster: 20, cold_starts: 0}
  hedge_budget: {charge_cold_starts: 1}
"""


HEDGE_OFF, HEDGE_ON = "hedge: {enabled: false, at: 0.5}", "hedge: {enabled: true, at: 0.5}"


def _controllers() -> dict[str, Controller]:
    return {
        "none": NoRemediation(),
        "seed-rule": SeedRule(),
        "core": CorePolicy("core", load_policy(CORE)),
        "core hedged": CorePolicy("core hedged", load_policy(CORE.replace(HEDGE_OFF, HEDGE_ON))),
    }


def observed() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, ctl in _controllers().items():
        stream = io.BytesIO()
        decided: list[str] = []

        def watch(what: str, now: float, obj: object, into: list[str] = decided) -> None:
            if what == "decision" and isinstance(obj, Decision):
                into.append(f"{obj.at:.3f} {obj.action} {obj.uid} {obj.reason}")

        sim = Simulation(SCENARIO, SCENARIO.seeds[0], ctl, record=stream, observer=watch)
        result = sim.run()
        summary = summarize([result]).to_json()
        out[name] = {
            "summary": json.loads(json.dumps(summary, default=str).replace("NaN", "null")),
            "stream_lines": stream.getvalue().count(b"\n"),
            "stream_sha256": hashlib.sha256(stream.getvalue()).hexdigest(),
            "ready_s_sum": round(math.fsum(result.ready_s), 6),
            "decisions": len(decided),
            "decisions_sha256": hashlib.sha256("\n".join(decided).encode()).hexdigest(),
        }
    return out


def test_seeded_runs_match_the_recorded_figures() -> None:
    got = observed()
    for name, want in EXPECTED.items():
        for key, value in want.items():
            assert got[name][key] == value, (name, key)
    assert set(got) == set(EXPECTED)


if __name__ == "__main__":
    print(json.dumps(observed(), indent=4, sort_keys=True))
