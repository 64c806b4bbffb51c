"""The step commands as a workflow container runs them: a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.steps.conftest import H200_UUID, smi_env

REPO = Path(__file__).resolve().parents[2]


def test_process_prints_one_verdict_and_json_logs(fake_smi: Path, tmp_path: Path) -> None:
    samples = [f"0, {H200_UUID}, {used}, 143771\n" for used in (14611, 14611, 14900)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **smi_env(tmp_path, samples)}
    done = subprocess.run(
        [sys.executable, "-m", "remediator.steps", "verify-gpu-memory", "--samples", "3",
         "--interval", "0", "--nvidia-smi", str(fake_smi), "--incident", "inc-9"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    verdict = json.loads(line)
    assert (verdict["outcome"], verdict["incident"]) == ("unstable", "inc-9")
    assert verdict["gpus"][0]["reasons"][0]["code"] == "spread"
    logs = [json.loads(x) for x in done.stderr.splitlines()]
    assert logs and all(x["incident"] == "inc-9" and x["step"] == "verify-gpu-memory" for x in logs)


def test_the_gpu_verifier_needs_no_kubernetes_client() -> None:
    """It runs on node images with python, click and nvidia-smi only."""
    code = (
        "import sys, remediator.steps.cli, remediator.steps.verify;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes', 'urllib3', 'orjson', 'yaml', 'aiohttp')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[]"
