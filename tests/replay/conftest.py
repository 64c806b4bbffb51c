"""How replay tests run the command: the installed console script, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_FALLBACK = "from remediator.replay import replay_command; replay_command()"


@cache
def _replay_argv() -> tuple[str, ...]:
    """`remediator replay` through the console script `pip install -e .` made; while
    `remediator.cli` cannot import (a subcommand still being written), the command itself."""
    script = Path(sys.executable).parent / "remediator"
    if script.exists():
        probe = subprocess.run(
            [sys.executable, "-c", "import remediator.cli"], capture_output=True, cwd=REPO
        )
        if probe.returncode == 0:
            return (str(script), "replay")
    return (sys.executable, "-c", _FALLBACK)


def run_replay_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `remediator replay ARGS...` from the repository root; never raises on exit code."""
    return subprocess.run(
        [*_replay_argv(), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
