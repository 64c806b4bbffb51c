"""The sections of docs/simulation-defaults.md that the knob search cannot show (floors,
windows, cordons): a table of policies run on fleets, and the command line each prints with."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable

from remediator.sim.fleet.compare import PolicySpec, compare
from remediator.sim.fleet.results import Summary
from remediator.sim.fleet.scenario import Scenario


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
