"""Fixtures for the step commands: the stand-in API server, a kubeconfig pointing
at it, the real H200 recordings, a fake nvidia-smi, and a CLI runner."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from remediator.steps.cli import step
from tests.data import CAPTURES
from tests.standins.kube_api import KubeApiServer

SMI = CAPTURES / "nvidia-smi"
TRACE = SMI / "smi_trace.csv"
TRACE_COLUMNS = "timestamp,index,memory.used,memory.total,utilization.gpu"
H200_UUID = "GPU-310120a7-1c6c-d5d8-776f-27da3337a90e"  # from smi_query.csv


@dataclass
class StepResult:
    exit_code: int
    verdict: dict[str, Any]
    logs: list[dict[str, Any]]
    stdout: str
    stderr: str


def run_step(*args: str, env: dict[str, str] | None = None) -> StepResult:
    """Run `remediator step ARGS` in-process; parse the verdict and every log line."""
    result = CliRunner().invoke(step, list(args), env=env, catch_exceptions=False)
    out_lines = [line for line in result.stdout.splitlines() if line.strip()]
    verdict = json.loads(out_lines[0]) if len(out_lines) == 1 else {}
    logs = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert "Logging error" not in result.stderr, result.stderr  # every log call at INFO works
    return StepResult(result.exit_code, verdict, logs, result.stdout, result.stderr)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[KubeApiServer, str]]:
    with KubeApiServer() as api:
        yield api, str(api.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
def fake_smi(tmp_path: Path) -> Path:
    """An executable `nvidia-smi` that replays $FAKE_SMI_RECORDING."""
    script = tmp_path / "nvidia-smi"
    fake = Path(__file__).with_name("fake_nvidia_smi.py")
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def smi_env(tmp_path: Path, samples: list[str]) -> dict[str, str]:
    recording = tmp_path / "recording.txt"
    recording.write_text("---\n".join(samples))
    return {"FAKE_SMI_RECORDING": str(recording), "FAKE_SMI_STATE": str(tmp_path / "calls")}
