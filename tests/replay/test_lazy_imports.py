"""`remediator replay` loads none of serve's clients: lazy command loading keeps them out."""

from __future__ import annotations

import subprocess
import sys

from tests.replay.conftest import REPO

SERVE_ONLY = ("kubernetes", "argo_workflows", "slack_sdk", "aiohttp", "remediator.runtime",
              "google.protobuf", "opentelemetry")  # fmt: skip

PROBE = """
import sys
from remediator.cli import main
try:
    main(["replay", "--output", "json", "examples/incident-70b.jsonl"])
except SystemExit as stop:
    assert stop.code == 0, stop.code
loaded = sorted({m for m in sys.modules if m.startswith(%r)})
print("LOADED", " ".join(loaded), file=sys.stderr)
"""


def test_replay_imports_none_of_serves_dependencies() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE % (SERVE_ONLY,)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LOADED"))
    assert line.split()[1:] == []
    assert '"kind":"decision"' in proc.stdout  # it did replay


def test_help_still_lists_every_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "remediator", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in ("replay", "serve", "step"):
        assert f"  {name} " in proc.stdout
