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
# (policy/stall.py FIRST_STRETCH_MARGIN: the same 24 deletions, none false, at other times).
EXPECTED: dict[str, dict[str, Any]] = {
    "core": {
        "decisions": 31,
        "decisions_sha256": "50967350d4c8a2529112b65893754cd7ce0695e40318907ef29b7b7469cc7e35",
        "ready_s_sum": 23776.528356,
        "stream_lines": 1088,
        "stream_sha256": "6b68bf891fbdfe803ca89021062e12e29a7686f1f5978302c51f58765b02496c",
        "summary": {
            "actions": {"delete-pod": 24, "notify": 2, "restart-warmup": 4, "verify-gpu-memory": 1},
            "censored": 27,
            "cold_starts": 90,
            "deletions": 24,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1800.0,
                "p50": 48.548547335594435,
                "p95": 1293.379465424417,
                "p99": 1800.0,
                "spread": 1751.4514526644057,
            },
            "gpu_minutes": 709.9240146817307,
            "hedge_gpu_minutes": 0.0,
            "hedges": 0,
            "held": 340,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "core",
            "ready": {
                "max": 1800.0,
                "p50": 46.6804779029826,
                "p95": 1293.379465424417,
                "p99": 1800.0,
                "spread": 1753.3195220970174,
            },
            "replicas": 66,
            "scenario": "golden",
        },
    },
    "none": {
        "decisions": 0,
        "decisions_sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ready_s_sum": 27239.307883,
        "stream_lines": 727,
        "stream_sha256": "9105ba3fc4c1c024fe19cba71248a15b7290851ed2f0005a2c76fd836db4bd6e",
        "summary": {
            "actions": {},
            "censored": 31,
            "cold_starts": 79,
            "deletions": 0,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1701.8533962930755,
                "p50": 51.51963452265704,
                "p95": 1350.0,
                "p99": 1701.8533962930755,
                "spread": 1650.3337617704185,
            },
            "gpu_minutes": 878.9245460278315,
            "hedges": 0,
            "hedge_gpu_minutes": 0.0,
            "held": 0,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "none",
            "ready": {
                "max": 1701.8533962930755,
                "p50": 49.691682511343515,
                "p95": 1350.0,
                "p99": 1701.8533962930755,
                "spread": 1652.161713781732,
            },
            "replicas": 79,
            "scenario": "golden",
        },
    },
    "seed-rule": {
        "decisions": 66,
        "decisions_sha256": "25e1d51cf7d948b9b9b83f229359156dfa2b0f5308cce61f6ca309a8b33b1dbd",
        "ready_s_sum": 23120.70009,
        "stream_lines": 850,
        "stream_sha256": "4449661c782f0e0d234fb2063996777047103bea6d2de3fb498f1c33a54a435c",
        "summary": {
            "actions": {"delete-pod": 66},
            "censored": 25,
            "cold_starts": 131,
            "deletions": 66,
            "false_kill_pct": 0.0,
            "false_kills": 0,
            "first_token": {
                "max": 1800.0,
                "p50": 51.14067852474409,
                "p95": 1350.0,
                "p99": 1800.0,
                "spread": 1748.859321475256,
            },
            "gpu_minutes": 686.5345736441923,
            "hedges": 0,
            "hedge_gpu_minutes": 0.0,
            "held": 0,
            "kill_loops": 0,
            "kind": "policy-summary",
            "policy": "seed-rule",
            "ready": {
                "max": 1800.0,
                "p50": 49.551184345154525,
                "p95": 1350.0,
                "p99": 1800.0,
                "spread": 1750.4488156548455,
            },
            "replicas": 65,
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
engine_logs: {follow: true, max_pods: 8}
guardrails:
  min_age: {factor: 1, stalled: true}
  cooldown: {seconds: 30}
  blast_radius: {max_pods: 5, max_percent: 25, max_pods_cluster: 20}
"""


def _controllers() -> dict[str, Controller]:
    return {
        "none": NoRemediation(),
        "seed-rule": SeedRule(),
        "core": CorePolicy("core", load_policy(CORE)),
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
