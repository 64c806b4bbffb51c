"""The container-start budget learned downwards (`adaptive.lower`) and its floor, chosen by
simulation on fleets whose GPU drivers hang (a container that never starts), which the
sixteen scenarios of `defaults.py` do not have.

    python -m remediator.sim.fleet.floors [--seeds 1,2] [--hours 3]

Prints the section of docs/simulation-defaults.md that `defaults.py --write` writes too.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec
from remediator.sim.fleet.controllers import CorePolicy, SeedRule
from remediator.sim.fleet.scenario import EXAMPLES, Scenario, load_scenario
from remediator.sim.fleet.sections import print_section, table

FLOORS = (30.0, 60.0, 90.0, 120.0, 180.0)
FAULTS = ((0.03, 0.0), (0.03, 0.05), (0.0, 0.05))  # (driver hangs, engine-init hangs)
PHASE = "container_start"

NOTE = (
    "The floor is not the lowest the simulation allows: its containers start as their "
    "profile draws them (tuned ~3 s, untuned ~94 s), and no floor from 30 s up deleted a "
    "healthy pod. A real node's first container after a reboot loads the GPU driver "
    "(persistence mode off: the untuned ~94 s) while its siblings on warm nodes start in "
    "seconds; 120 s holds that whole start and still finds a driver hang on a tuned fleet "
    "in half the time the static 300 s took. On the untuned fleets the floor does not "
    "matter (their siblings' containers take ~94 s: the learned budget is 190-240 s) and "
    "min_age decides: it holds a driver-hung pod until it is as old as its model's expected "
    "cold start as estimated when the pod is first judged, which the learned budget does "
    "sooner; as the estimate moves with the fleet's recent cold starts, that pod may go "
    "sooner or later than under the static budget (here, one fleet of two later)."
)


def policy(name: str, lower: tuple[str, ...], floor: float) -> PolicySpec:
    base = PolicyFile()
    stuck = base.rules.stuck_pod
    adaptive = replace(stuck.adaptive, lower=lower, lower_floor_s=floor)
    config = replace(base, rules=replace(base.rules, stuck_pod=replace(stuck, adaptive=adaptive)))
    return PolicySpec(name, lambda: CorePolicy(name, config))


def specs() -> list[PolicySpec]:
    return [
        PolicySpec("seed rule", lambda: SeedRule("seed rule")),
        policy("static 300 s", (), FLOORS[0]),
        *[policy(f"floor {f:g} s", (PHASE,), f) for f in FLOORS],
    ]


def fleets(seeds: tuple[int, ...], hours: float) -> list[tuple[str, Scenario]]:
    out = []
    for profile in ("tuned", "untuned"):
        base = load_scenario(EXAMPLES / f"{profile}.yaml")
        for driver, hang in FAULTS:
            fleet = base.with_faults(driver_hang=driver, engine_init_hang=hang)
            name = f"{profile}, driver hangs {driver:.0%}, engine hangs {hang:.0%}"
            out.append((name, replace(fleet, seeds=seeds, duration_s=hours * 3600)))
    return out


def section(seeds: tuple[int, ...] = (1, 2), hours: float = 3.0) -> str:
    """The markdown section: P99 time to Ready and false kills per floor and fleet."""
    intro = (
        "Once a model's siblings have started their containers, a pod's container-start "
        "budget is what they took (adaptive.factor x their P99, widened for few samples) "
        "even where that is under the static 300 s, but never under the floor. Fleets: "
        "`examples/sim/tuned.yaml` and `untuned.yaml` with driver hangs (the container never "
        f"starts) and engine-init hangs; seeds {', '.join(map(str, seeds))}; {hours:g} virtual "
        "hours each (`python -m remediator.sim.fleet.floors`). P99 time to Ready, and false "
        "kills:"
    )
    title = "The container-start floor (`adaptive.lower`, `adaptive.lower_floor_s`)"
    return table(title, intro, specs(), fleets(seeds, hours),
                 lambda s: f"{s.ready['p99']:.0f}s, {s.false_kills}", NOTE)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return print_section(__doc__ or "", section, "1,2", 3.0, argv)


if __name__ == "__main__":
    sys.exit(main())
