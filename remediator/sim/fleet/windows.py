"""The hedge budget's window (`hedge_budget.window_s`): over how long cold starts pay for
hedges, on the example fleets with hangs, which the sixteen scenarios of `defaults.py` run
for fewer hours than the default window holds.

    python -m remediator.sim.fleet.windows [--seeds 1,2,3] [--hours 6]

Prints the section of docs/simulation-defaults.md that `defaults.py --write` writes too.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from remediator.guard.hedge_budget import HedgeBudgetConfig
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.scenario import EXAMPLES, load_scenario
from remediator.sim.fleet.sections import print_section, table

WINDOWS_H = (1.0, 3.0, 24.0)
HANGS = 0.05

NOTE = (
    "A day (the default) is not what the runs above choose: from one hour to a day, the "
    "tail and the hedges' share of GPU-minutes move within a hedge or two. It is what they "
    "cannot show: a fleet's load runs in days, and a window shorter than a day leaves a "
    "morning's scale-up paid only by the quiet hours before it, while a longer one (the "
    "budget before: since the state began) lets a quiet month's cold starts pay for a "
    "burst of stalls at once."
)


def policy(hours: float) -> PolicySpec:
    base = PolicyFile()
    budget = replace(base.guardrails.of("hedge_budget", HedgeBudgetConfig), window_s=hours * 3600)
    name = f"window {hours:g} h"
    config = replace(base, guardrails=base.guardrails.with_stage("hedge_budget", budget))
    return PolicySpec(name, lambda: CorePolicy(name, config))


def section(seeds: tuple[int, ...] = (1, 2, 3), hours: float = 6.0) -> str:
    """The markdown section: per fleet and window, P99 time to Ready, hedges and their
    share of cold-start GPU-minutes."""
    intro = (
        "Hedges' GPU-minutes are held within 5% of the cold starts' GPU-minutes over the "
        "last `window_s`. Fleets: `examples/sim/tuned.yaml` and `untuned.yaml` with "
        f"{HANGS:.0%} of engine inits hanging; seeds {', '.join(map(str, seeds))}; {hours:g} "
        "virtual hours each (`python -m remediator.sim.fleet.windows`). P99 time to Ready, "
        "hedges run, and their GPU-minutes as a share of cold starts':"
    )
    fleets = [
        (f"{profile}, {HANGS:.0%} hangs",
         replace(load_scenario(EXAMPLES / f"{profile}.yaml").with_faults(engine_init_hang=HANGS),
                 seeds=seeds, duration_s=hours * 3600))
        for profile in ("tuned", "untuned")
    ]  # fmt: skip
    return table(
        "The hedge budget's window (`hedge_budget.window_s`)", intro,
        [policy(h) for h in WINDOWS_H], fleets,
        lambda s: f"{s.ready['p99']:.0f}s, {s.hedges}, "
        f"{100 * s.hedge_gpu_minutes / max(s.gpu_minutes, 1e-9):.2f}%",
        NOTE,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return print_section(__doc__ or "", section, "1,2,3", 6.0, argv)


if __name__ == "__main__":
    sys.exit(main())
