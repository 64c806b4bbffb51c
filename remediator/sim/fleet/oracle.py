"""How fast a hang must be found for the tail goal: the default policy beside an oracle that
finds every hang a fixed delay after it began (`controllers.Oracle`, the simulator's ground
truth), on the example fleets with 5% of engine inits hung.

    python -m remediator.sim.fleet.oracle [--seeds 1,2,3] [--hours 6]

Prints the section of docs/simulation-defaults.md that `defaults.py --write` writes too.
"""

from __future__ import annotations

import sys

from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec
from remediator.sim.fleet.controllers import CorePolicy, Oracle, SeedRule
from remediator.sim.fleet.sections import example_fleets, print_section, table

DELAYS_S = (0.0, 10.0, 20.0, 30.0)  # the oracle's delay from a hang's start to its finding
HANGS = (0.0, 0.05)

NOTE = (
    "What sets the tail is how long a hang goes unfound, not what is done once it is. Found "
    "the instant it begins, a hung pod's replacement is Ready about one cold start later and "
    "the P99 is within 1.15× the hang-free one on every fleet here; each 10 s of delay adds "
    "up to 10 s. On the tuned fleet the issue's 1.25× needs every hang found within ~5 s of "
    "its start (10 s late is already ~1.35×). The default finds a hang by its step's silence: "
    "the stretch since vLLM's last step line must pass max(30 s, 2 × the siblings' P95 "
    "there), then 3 checks 10 s apart, then the delete workflow (~5 s): ~55 s after the hang "
    "on the tuned fleet, where healthy steps take 4-11 s and a slow healthy one looks just "
    "like a hung one for its first seconds. A hedge at half the stall's limit starts the "
    "replacement ~15 s after the hang, where the hedge budget and the rollout rule let it. "
    "On the untuned fleet an oracle 30 s late is still within 1.15×: there the default's gap "
    "is its limits, twice the siblings' P95 of steps that take minutes. Closing the tuned "
    "fleet's gap needs a signal that tells a hung engine from a slow one within seconds "
    "(vLLM's own start-up progress, vllm-project/vllm#50282, open), not a shorter "
    "silence: the oracle kills no healthy pod because it knows, and no timer on a log "
    "can."
)


def policies(config: PolicyFile) -> list[PolicySpec]:
    out = [PolicySpec("seed rule", lambda: SeedRule("seed rule")),
           PolicySpec("default", lambda: CorePolicy("default", config))]  # fmt: skip
    out += [oracle(config, after) for after in DELAYS_S]
    return out


def oracle(config: PolicyFile, after_s: float) -> PolicySpec:
    name = f"default + oracle {after_s:g}s"
    return PolicySpec(name, lambda: Oracle(name, config, after_s))


def section(seeds: tuple[int, ...] = (1, 2, 3), hours: float = 6.0) -> str:
    """The markdown section: per fleet and policy, P99 time to Ready and false kills."""
    intro = (
        "Fleets: `examples/sim/tuned.yaml` and `untuned.yaml`, as given and with no spare GPUs, "
        f"without hangs and with 5% of engine inits hung; seeds {', '.join(map(str, seeds))}; "
        f"{hours:g} virtual hours each (`python -m remediator.sim.fleet.oracle`). 'oracle Ns': "
        "the default, and every hang found N s after it began from the simulator's ground "
        "truth, its pod deleted as the default deletes a hung pod (`sim.fleet.controllers."
        "Oracle`; a bound, not a policy). P99 time to Ready (false kills):"
    )
    return table(
        "How fast a hang must be found (an oracle)", intro, policies(PolicyFile()),
        example_fleets(seeds, hours, HANGS),
        lambda s: f"{s.ready['p99']:.0f}s ({s.false_kill_pct:.2f}%)", NOTE,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return print_section(__doc__ or "", section, "1,2,3", 6.0, argv)


if __name__ == "__main__":
    sys.exit(main())
