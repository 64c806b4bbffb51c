"""Cordoning unsettled nodes (`gpu_memory.cordon`): the example fleets with nodes whose GPU
memory never settles, which the sixteen scenarios of `defaults.py` do not have.

    python -m remediator.sim.fleet.cordons [--seeds 1,2] [--hours 3]

Prints the section of docs/simulation-defaults.md that `defaults.py --write` writes too.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from remediator.policy.config import GpuMemoryConfig
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec
from remediator.sim.fleet.controllers import CorePolicy, SeedRule
from remediator.sim.fleet.sections import example_fleets, print_section, table

UNSETTLED = 4  # nodes whose GPU memory never settles, in each fleet
HANGS = (0.0, 0.05)

NOTE = (
    "Cordoning is on by default. Uncordoned, a node whose GPU memory never settles takes "
    "every pod scheduled there, and each replacement lands there again (its GPUs are the "
    "freest); deleting them, as the seed rule and the default without a cordon do, only "
    "turns the same GPUs over. Cordoned, its pods' replacements go elsewhere, or wait for "
    "room where the fleet has no spare GPUs: a shorter wait than a hang. It kills nothing; "
    "it takes a node's GPUs out of scheduling until someone uncordons it, which remediator "
    "never does, so `guardrails.cordon_cap` holds cordons past 8 nodes a day (a common "
    "cause: a driver rollout, a broken verification)."
)


def policy(cordon: bool) -> PolicySpec:
    base = PolicyFile()
    rules = replace(base.rules, gpu_memory=GpuMemoryConfig(cordon=cordon))
    name = "cordon on (default)" if cordon else "cordon off"
    config = replace(base, rules=rules)
    return PolicySpec(name, lambda: CorePolicy(name, config))


def section(seeds: tuple[int, ...] = (1, 2), hours: float = 3.0) -> str:
    """The markdown section: per fleet and policy, P99 time to Ready, pods deleted and
    cold-start GPU-minutes."""
    policies = [PolicySpec("seed rule", lambda: SeedRule("seed rule")), policy(False),
                policy(True)]  # fmt: skip
    intro = (
        "Fleets: `examples/sim/tuned.yaml` and `untuned.yaml`, as given and with no spare GPUs, "
        f"each with {UNSETTLED} nodes whose GPU memory never settles (engine init hangs there; "
        "an alert fires, the verification finds the node unsettled); seeds "
        f"{', '.join(map(str, seeds))}; {hours:g} virtual hours each "
        "(`python -m remediator.sim.fleet.cordons`). P99 time to Ready, pods deleted, and the "
        "GPU-minutes pods held while cold-starting:"
    )
    return table(
        "Cordoning unsettled nodes (`gpu_memory.cordon`)", intro, policies,
        example_fleets(seeds, hours, HANGS, unsettled_gpu_nodes=UNSETTLED),
        lambda s: f"{s.ready['p99']:.0f}s, {s.deletions} deleted, {s.gpu_minutes:.0f} GPU-min",
        NOTE,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return print_section(__doc__ or "", section, "1,2", 3.0, argv)


if __name__ == "__main__":
    sys.exit(main())
