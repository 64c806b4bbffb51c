"""The fleet simulator against issue 14's goals, side by side in one run.

    .venv/bin/python bench/bench_sim.py            # ~3-6 min on 2 shared cores
    .venv/bin/python bench/bench_sim.py --quick    # one seed, shorter runs

1. Tuned fleet (examples/sim/tuned.yaml), 5% of cold starts hanging in engine init: the
   default policy's P99 time to Ready per requested replica over the same fleet's P99 with
   no hangs (goal <= 1.25), and its false kills (goal <= 0.5% of pods); the seed's rule,
   no remediation and default+hedge (a stalled pod's replacement started early) beside it.
2. Untuned fleet (examples/sim/untuned.yaml), 5% hangs: kill loops (goal 0) and false
   kills (goal <= 0.5%) of the default, the seed's rule and no remediation beside it.
3. Speed on a day of a 500-node fleet (examples/sim/fleet-day.yaml, no hangs): simulated
   cold starts per wall second of the simulator alone, with every input built for a
   listener, and driving the real core (goal, with the core: >= 10,000/s; a day in under a
   minute), and the core's share of that last run.

Prints figures and which goals were missed; never fails.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from remediator.contract.decision import Decision
from remediator.inputs.records import Input
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import builtin_policies, compare, table
from remediator.sim.fleet.controllers import Controller, CorePolicy, NoRemediation
from remediator.sim.fleet.results import Summary
from remediator.sim.fleet.scenario import Scenario, load_scenario
from remediator.sim.fleet.simulation import Simulation

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sim"


class Listener:
    """Takes every input the cluster emits and decides nothing: the cost of building them."""

    name = "listener"
    wants_inputs = True

    def feed(self, item: Input) -> None:
        return None

    def advance(self, now: float) -> None:
        return None

    def take(self) -> list[Decision]:
        return []

    def applied(self, decision: Decision) -> None:
        return None

    def held(self) -> int:
        return 0

    def next_due(self) -> float | None:
        return None


def _goal(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _by(summaries: list[Summary]) -> dict[str, Summary]:
    return {s.policy: s for s in summaries}


def fleet_goals(name: str, quick: bool) -> list[str]:
    base = load_scenario(EXAMPLES / f"{name}.yaml")
    if quick:
        base = replace(base, seeds=base.seeds[:1], duration_s=base.duration_s / 2)
    free, _ = compare(base.with_faults(engine_init_hang=0.0), builtin_policies()[2:3])
    hung, _ = compare(base.with_faults(engine_init_hang=0.05), builtin_policies(hedge=True))
    print(f"\n== {name}: 5% of cold starts hang in engine init ({len(base.seeds)} seed(s), "
          f"{base.duration_s / 3600:g} h each) ==")  # fmt: skip
    print(table(hung))
    p99_free = free[0].ready["p99"]
    print(f"hang-free P99 time to Ready (default policy): {p99_free:.0f}s")
    by = _by(hung)
    missed = []
    for policy in ("none", "seed-rule", "default", "default+hedge"):
        s = by[policy]
        ratio = s.ready["p99"] / p99_free
        print(f"  {policy:14s} P99 / hang-free P99 = {ratio:6.2f}   false kills "
              f"{s.false_kill_pct:5.2f}%   kill loops {s.kill_loops}")  # fmt: skip
    d = by["default"]
    if name == "tuned":
        ratio = d.ready["p99"] / p99_free
        print(f"goal: default P99 <= 1.25 x hang-free: {ratio:.2f} {_goal(ratio <= 1.25)}")
        hedge = by["default+hedge"].ready["p99"] / p99_free
        print(f"      (default+hedge: {hedge:.2f} {_goal(hedge <= 1.25)})")
        if ratio > 1.25:
            missed.append(f"tuned P99 ratio {ratio:.2f}")
    else:
        print(f"goal: default kill loops 0: {d.kill_loops} {_goal(d.kill_loops == 0)}")
        if d.kill_loops:
            missed.append("untuned kill loops")
    fk = d.false_kill_pct
    print(f"goal: default false kills <= 0.5%: {fk:.2f}% {_goal(fk <= 0.5)}")
    if fk > 0.5:
        missed.append(f"{name} false kills {fk:.2f}%")
    return missed


def _rate(scenario: Scenario, make: Callable[[], Controller]) -> tuple[int, float]:
    started = time.perf_counter()
    result = Simulation(scenario, scenario.seeds[0], make()).run()
    return result.cold_starts, time.perf_counter() - started


def speed(quick: bool) -> list[str]:
    day = load_scenario(EXAMPLES / "fleet-day.yaml").with_faults(engine_init_hang=0.0)
    if quick:
        day = replace(day, duration_s=day.duration_s / 6)
    print(f"\n== speed: {day.name}, {day.node_count} nodes x {day.gpus_per_node} GPUs, "
          f"{day.duration_s / 3600:g} virtual hours ==")  # fmt: skip
    missed = []
    rows: tuple[tuple[str, Callable[[], Controller]], ...] = (
        ("simulator alone", NoRemediation),
        ("simulator + every input built", Listener),
        ("simulator + the real core (default policy)",
         lambda: CorePolicy("default", PolicyFile())),
    )  # fmt: skip
    walls = []
    for i, (label, make) in enumerate(rows):
        cold, wall = _rate(day, make)
        walls.append(wall)
        rate = cold / wall
        print(
            f"  {label:44s} {cold:7d} cold starts in {wall:6.2f}s = {rate:8.0f}/s "
            f"= {rate / 10_000:5.2f} x goal; {day.duration_s / wall:7.0f} x real time"
        )
        if i == 2 and rate < 10_000:
            missed.append(f"simulator with the core {rate:.0f} cold starts/s")
        if i == 2 and not quick and wall > 60:
            missed.append(f"a fleet day with the core took {wall:.0f}s")
    core = walls[2] - walls[1]
    share = 100 * core / walls[2]
    print(f"  the core's share of the last run: {core:.2f}s of {walls[2]:.2f}s ({share:.0f}%; "
          "the rest is the simulator and its inputs)")  # fmt: skip
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    missed = fleet_goals("tuned", args.quick) + fleet_goals("untuned", args.quick)
    missed += speed(args.quick)
    print("\nmissed: " + ("; ".join(missed) if missed else "none"))


if __name__ == "__main__":
    main()
