"""The sections of docs/simulation-defaults.md that the knob search cannot show (floors,
windows, cordons): a table of policies run on fleets, and the command line each prints with."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from remediator.sim.fleet.compare import PolicySpec, compare
from remediator.sim.fleet.results import Summary
from remediator.sim.fleet.scenario import EXAMPLES, Scenario, load_scenario, no_spare


def example_fleets(
    seeds: tuple[int, ...], hours: float, hang_rates: Iterable[float], **faults: Any
) -> list[tuple[str, Scenario]]:
    """The example fleets (tuned, untuned), as given and with GPUs for their peak only, at
    each rate of engine-init hangs, with `faults` besides: a row each."""
    out = []
    for profile in ("tuned", "untuned"):
        base = replace(load_scenario(EXAMPLES / f"{profile}.yaml"), seeds=seeds,
                       duration_s=hours * 3600)  # fmt: skip
        for shape, fleet in (("", base), (" no spare", no_spare(base))):
            for rate in hang_rates:
                scenario = fleet.with_faults(engine_init_hang=rate, **faults)
                out.append((f"{profile}{shape}, {rate:.0%} hangs", scenario))
    return out


def table(
    title: str,
    intro: str,
    policies: list[PolicySpec],
    fleets: Iterable[tuple[str, Scenario]],
    cell: Callable[[Summary], str],
    note: str,
) -> str:
    """The markdown section: a row per fleet, a cell per policy, then the note."""
    lines = [
        f"## {title}",
        "",
        intro,
        "",
        "| fleet | " + " | ".join(p.name for p in policies) + " |",
        "|---|" + "---|" * len(policies),
    ]
    for label, scenario in fleets:
        summaries, _ = compare(scenario, policies)
        lines.append(f"| {label} | " + " | ".join(cell(s) for s in summaries) + " |")
    return "\n".join([*lines, "", note]) + "\n"


def print_section(
    doc: str,
    section: Callable[[tuple[int, ...], float], str],
    seeds: str,
    hours: float,
    argv: list[str] | None,
) -> int:
    """A section's command line: --seeds and --hours, the markdown on stdout."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seeds", default=seeds, help=f"seeds per fleet (default {seeds})")
    parser.add_argument("--hours", type=float, default=hours, help="virtual hours per run")
    args = parser.parse_args(argv)
    sys.stdout.write(section(tuple(int(s) for s in args.seeds.split(",")), args.hours))
    return 0
