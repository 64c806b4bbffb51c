"""`scripts/cluster status` on a cluster that is not running (issue 18, #13): a clear JSON
answer (nothing runs, no server), never a KeyError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_status_of_a_stopped_cluster_says_nothing_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/cluster"), "--home", str(tmp_path), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["server"] is None and status["components"] == {}
    assert status["nodes_ready"] == 0 and status["argo"]["server"] is None
