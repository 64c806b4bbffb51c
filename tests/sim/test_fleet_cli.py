"""`remediator simulate` and `remediator demo` from the command line (click's runner)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from remediator.cli import main
from remediator.sim.fleet.scenario import ScenarioError, parse_scenario

SMALL = """
name: small
profile: tuned
duration_s: 3600
seeds: [1]
nodes: {count: 6, gpus: 8}
deployments:
  - {name: vllm-llama-70b, model: meta-llama/Llama-3.1-70B-Instruct, replicas: 8}
load:
  scale: {every_s: 600, low: 4, high: 12}
faults:
  engine_init_hang: 0.1
"""


def test_simulate_prints_the_comparison_and_writes_json_and_plots(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    policy = tmp_path / "patient.yaml"
    policy.write_text("stuck_pod:\n  budgets: {engine_init: 300}\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", str(scenario), "--policy", str(policy),
                                       "--unhedged", "--record", "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    for policy_name in ("none", "seed-rule", "default", "patient", "default-unhedged"):
        assert f"\n{policy_name} " in result.output
    summary = orjson.loads((out / "summary.json").read_bytes())
    assert [s["policy"] for s in summary] == [
        "none",
        "seed-rule",
        "default",
        "patient",
        "default-unhedged",
    ]
    assert all(s["replicas"] > 0 for s in summary)
    for png in ("ready-cdf.png", "swimlane.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    replays = sorted(p.name for p in out.glob("replay-*.jsonl"))
    assert len(replays) == 5
    replay = CliRunner().invoke(main, ["replay", "-o", "json", str(out / replays[0])])
    assert replay.exit_code == 0


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("profile: fast\ndeployments: [{name: a, model: m}]", "profile"),
        ("deployments: [{name: a, model: m, gpus: 2}]", "deployments[0].gpus"),
        ("deployments: []", "deployments"),
        ("deployments: [{name: a, model: m}]\nfaults: {engine_init_hang: 1.5}",
         "faults.engine_init_hang"),
        ("deployments: [{name: a, model: m}]\nnodes: {count: 0}", "nodes.count"),
        ("deployments: [{name: a, model: m}]\nfaults: {slow_gpu_nodes: 2}",
         "faults.slow_gpu_nodes"),
        ("deployments: [{name: a, model: m}]\nfaults: {slow_gpu_nodes: {count: 2, factor: 0.5}}",
         "faults.slow_gpu_nodes.factor"),
        ("deployments: [{name: a, model: m}]\nfaults: {slow_gpu_nodes: {nodes: 2}}",
         "faults.slow_gpu_nodes.nodes"),
    ],
)  # fmt: skip
def test_a_bad_scenario_is_refused_with_the_key(tmp_path: Path, text: str, where: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(text)
    result = CliRunner().invoke(main, ["simulate", str(scenario), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert where in result.output


def test_demo_runs_without_a_cluster() -> None:
    result = CliRunner().invoke(main, ["demo", "--plain", "--speed", "1000000",
                                       "--seconds", "1200"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "delete-pod" in result.output and "cold starts" in result.output
    # The runtime's outbox worker told Slack, and replied in the thread when it ended.
    assert "slack: Remediating: delete-pod" in result.output
    assert "*Succeeded* in" in result.output
    assert "outbox rows: ended" in result.output


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)  # fmt: skip
_keys = st.sampled_from(["name", "profile", "duration_s", "seeds", "nodes", "deployments",
                         "load", "faults", "executor_delay_s", "bogus"])  # fmt: skip


@given(st.dictionaries(_keys, _values, max_size=6))
def test_any_scenario_document_parses_or_is_refused_with_a_path(doc: dict[str, object]) -> None:
    try:
        scenario = parse_scenario(doc)
    except ScenarioError as exc:
        assert exc.path and str(exc).startswith(exc.path)
    else:
        assert scenario.deployments and scenario.seeds
