"""How the simulated kube-scheduler scores a node's free GPUs (`nodes.scoring`), and what it
does to the warmup restart on a fleet whose models need 1 to 8 GPUs.

With the default scoring (LeastAllocated: the emptiest node first) only image locality packs
pods, and only while few nodes hold the new image. The warmup restart puts it on every node,
so each small pod then takes the emptiest node, and pods that need a whole one wait: warming
anyway (`image_update.mixed_gpus: warm`) put the default policy's P99 at 5× the seed rule's
(which warms nothing); by default it now warms nothing on such a fleet. Scored the way GPU
clusters configure it (MostAllocated on nvidia.com/gpu) the same fleet keeps whole nodes
free, and warming is what puts the default under the seed rule.
"""

from __future__ import annotations

import pytest

from remediator.policy_file import PolicyFile
from remediator.sim.fleet import warmups
from remediator.sim.fleet.compare import PolicySpec, compare
from remediator.sim.fleet.controllers import SeedRule
from remediator.sim.fleet.results import Summary
from remediator.sim.fleet.scenario import ScenarioError, parse_scenario


def _run(scoring: str) -> dict[str, Summary]:
    policies = [
        PolicySpec("seed rule", lambda: SeedRule("seed rule")),
        warmups.policy("skip"),
        warmups.policy("warm"),
    ]
    # Two seeds, as docs/simulation-defaults.md's table: one seed's P99 (its 11th slowest
    # replica here) moves by 15 s between policies that differ only in when hedges start.
    summaries, _ = compare(warmups.fleet("tuned", scoring, (1, 2), 3.0), policies)
    return {s.policy.split(" ")[0]: s for s in summaries}


def test_packed_nodes_keep_whole_nodes_for_the_largest_models() -> None:
    spread, pack = _run("spread"), _run("pack")
    # spread: warming fragments the nodes; the default does not warm here
    assert spread["warm"].ready["p99"] > 2 * spread["seed"].ready["p99"]
    assert spread["skip"].ready["p99"] <= spread["seed"].ready["p99"]
    assert spread["skip"].actions.get("restart-warmup", 0) == 0
    assert spread["warm"].actions.get("restart-warmup", 0) > 0
    # pack: whole nodes stay free, and warming pays
    assert pack["warm"].ready["p99"] <= pack["seed"].ready["p99"]
    assert pack["warm"].ready["p99"] < spread["warm"].ready["p99"] / 4
    assert pack["warm"].replicas >= spread["warm"].replicas
    assert PolicyFile().rules.image_update.mixed_gpus == "skip"  # what the section says


def test_the_warmup_section_runs_each_policy_on_each_fleet() -> None:
    text = warmups.section(seeds=(1,), hours=0.5)
    rows = [line for line in text.splitlines() if line.startswith(("| tuned", "| untuned"))]
    assert len(rows) == 4
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert len(cells) == 3 and all(c.endswith(" replicas") for c in cells)


def test_a_scenario_names_its_scoring_or_gets_the_default() -> None:
    doc = {"deployments": [{"name": "d", "model": "m"}], "nodes": {"count": 2}}
    assert parse_scenario(doc).node_scoring == "spread"
    doc["nodes"] = {"count": 2, "scoring": "pack"}
    assert parse_scenario(doc).node_scoring == "pack"


@pytest.mark.parametrize("scoring", ["binpack", "", 3])
def test_an_unknown_scoring_is_a_clear_error(scoring: object) -> None:
    doc = {"deployments": [{"name": "d", "model": "m"}], "nodes": {"scoring": scoring}}
    with pytest.raises(ScenarioError, match="nodes.scoring"):
        parse_scenario(doc)
