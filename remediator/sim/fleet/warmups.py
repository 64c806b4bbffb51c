"""Warming a node pool shared by models of different GPU counts (`image_update.mixed_gpus`):
the example profiles with four models of TP 1, 2, 4 and 8 on 8-GPU nodes, which the sixteen
scenarios of `defaults.py` (one size each) do not have, under both ways kube-scheduler may
score a node's free GPUs (`nodes.scoring`).

    python -m remediator.sim.fleet.warmups [--seeds 1,2] [--hours 3]

Prints the section of docs/simulation-defaults.md that `defaults.py --write` writes too.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec
from remediator.sim.fleet.controllers import CorePolicy, SeedRule
from remediator.sim.fleet.scenario import (
    EXAMPLES,
    DeploymentSpec,
    ScaleLoad,
    Scenario,
    load_scenario,
    no_spare,
)
from remediator.sim.fleet.sections import print_section, table

MODELS = (
    DeploymentSpec("vllm-llama-8b", "meta-llama/Llama-3.1-8B-Instruct", 8, tp=1),
    DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 6, tp=2),
    DeploymentSpec("vllm-mixtral", "mistralai/Mixtral-8x22B-Instruct-v0.1", 3, tp=4),
    DeploymentSpec("vllm-llama-405b", "meta-llama/Llama-3.1-405B-Instruct-FP8", 2, tp=8),
)
# Busy: a scale every 10 min to up to 24 replicas each, a rollout every 30 min; the random
# fleets where warming every node cost most (docs/simulation.md) were of this kind.
SCALE, ROLLOUT_S = ScaleLoad(600, 2, 24), 1800.0

NOTE = (
    "`skip` is the default: where the selected workloads' pods need different GPU counts, "
    "an image update warms nothing and says why. Warming puts the image on every node; "
    "under kube-scheduler's default scoring (`spread`: LeastAllocated) image locality then "
    "no longer packs the small pods, they take the emptiest nodes, and the 8-GPU pods wait "
    "for a whole node (a replica still waiting at the end of a run counts until then). "
    "Where nvidia.com/gpu is scored MostAllocated (`pack`), whole nodes stay free and "
    "warming pays: set `image_update.mixed_gpus: warm` there. On the example fleets (one "
    "size of pod) nothing changes."
)


def fleet(profile: str, scoring: str, seeds: tuple[int, ...], hours: float) -> Scenario:
    """The profile's example fleet with the four models, no spare GPUs, scored `scoring`."""
    base = load_scenario(EXAMPLES / f"{profile}.yaml")
    mixed = replace(base, deployments=MODELS, scale=SCALE, rollout_every_s=ROLLOUT_S,
                    seeds=seeds, duration_s=hours * 3600, node_scoring=scoring)  # fmt: skip
    return no_spare(mixed)


def policy(mixed_gpus: str) -> PolicySpec:
    base = PolicyFile()
    update = replace(base.rules.image_update, mixed_gpus=mixed_gpus)
    config = replace(base, rules=replace(base.rules, image_update=update))
    name = f"{mixed_gpus}{' (default)' if mixed_gpus == 'skip' else ''}"
    return PolicySpec(name, lambda: CorePolicy(name, config))


def section(seeds: tuple[int, ...] = (1, 2), hours: float = 3.0) -> str:
    """The markdown section: per fleet and policy, P99 time to Ready and replicas served."""
    policies = [PolicySpec("seed rule", lambda: SeedRule("seed rule")), policy("skip"),
                policy("warm")]  # fmt: skip
    fleets = [
        (f"{profile}, {scoring}", fleet(profile, scoring, seeds, hours))
        for profile in ("tuned", "untuned")
        for scoring in ("spread", "pack")
    ]
    intro = (
        "Fleets: the example profiles with four models on 8-GPU nodes (TP 1, 2, 4 and 8), "
        "each scaled every 10 min to up to 24 replicas and rolled out every 30 min, GPUs for "
        "the peak and no more, nodes scored `spread` (kube-scheduler's default) or `pack` "
        f"(`nodes.scoring`); seeds {', '.join(map(str, seeds))}; {hours:g} virtual hours "
        "each (`python -m remediator.sim.fleet.warmups`). P99 time to Ready and replicas "
        "served:"
    )
    return table(
        "Warming a pool of mixed GPU counts (`image_update.mixed_gpus`)", intro, policies,
        fleets, lambda s: f"{s.ready['p99']:.0f}s, {s.replicas} replicas", NOTE,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return print_section(__doc__ or "", section, "1,2", 3.0, argv)


if __name__ == "__main__":
    sys.exit(main())
