"""Instructions per simulated cold start, counted by valgrind's callgrind: the speed rows of
bench_sim.py in a figure that does not move with the machine's load.

CPU seconds on a shared 2-core machine move by 10% from run to run, more than most changes
to the core gain; callgrind counts the same instructions on every run of the same build
(seen: the same total to 0.004% twice, once with the other core busy). A change to the hot
path is judged here first, then by bench_sim's speed rows.

Runs the simulator with the real core (default policy) over a slice of examples/sim/fleet-day
(no hangs), and once with no time simulated (imports and setup), and prints the difference
per cold start. Run it on the build to judge:

    .venv/bin/python bench/bench_instructions.py              # pure Python (about 3 min)
    scripts/compiled python bench/bench_instructions.py       # compiled, as the image ships it

Needs valgrind (on every machine kind here; not in the image). Prints; never fails.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_sim import _build  # noqa: E402

from remediator.policy_file import PolicyFile  # noqa: E402
from remediator.sim.fleet.controllers import CorePolicy  # noqa: E402
from remediator.sim.fleet.scenario import EXAMPLES, load_scenario  # noqa: E402
from remediator.sim.fleet.simulation import Simulation  # noqa: E402

_COLLECTED = re.compile(r"Collected : (\d+)")


def simulate(hours: float) -> int:
    """Run `hours` of the fleet day; the cold starts it made."""
    day = load_scenario(EXAMPLES / "fleet-day.yaml").with_faults(engine_init_hang=0.0)
    day = replace(day, duration_s=hours * 3600.0)
    sim = Simulation(day, day.seeds[0], CorePolicy("default", PolicyFile()))
    if hours <= 0:
        return 0
    return sim.run().cold_starts


def counted(hours: float) -> tuple[int, int]:
    """(instructions, cold starts) of this script's `--run HOURS` under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
               sys.executable, __file__, "--run", str(hours)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from callgrind:\n{done.stderr[-2000:]}")
    cold = int(done.stdout.strip().splitlines()[-1])
    return int(found.group(1)), cold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, default=2.0, help="virtual hours simulated")
    parser.add_argument("--run", type=float, help=argparse.SUPPRESS)  # (the measured child)
    args = parser.parse_args()
    if args.run is not None:
        print(simulate(args.run))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH")
    print(f"== instructions: fleet-day, {args.hours:g} virtual hours, no hangs; {_build()} ==")
    setup, _ = counted(0.0)
    total, cold = counted(args.hours)
    run = total - setup
    print(f"  setup (imports, the fleet): {setup / 1e6:9.0f} M instructions")
    print(f"  {cold} cold starts:          {run / 1e6:9.0f} M instructions "
          f"= {run / max(cold, 1) / 1e3:7.0f} k per cold start")  # fmt: skip


if __name__ == "__main__":
    main()
