"""The command line without a cluster: usage errors and an API server that is not there.
(Everything with a cluster is in tests/live/test_coldstart.py, on the real control plane.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from tests.coldstart.support import REPO


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "kubectl-coldstart"
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, cwd=REPO, timeout=60, env=env
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


def _kubeconfig(path: Path, server: str) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "llm"}}],
        "current-context": "ctx",
    }
    path.write_text(json.dumps(cfg))
    return path


def test_help_teaches() -> None:
    out = _run("--help")
    assert out.returncode == 0
    usage = "Usage: kubectl coldstart [OPTIONS] [POD | deploy/NAME | sts/NAME]"
    assert out.stdout.startswith(usage)
    for words in ("deploy/vllm-llama-70b", "--logs", "pods/log", "NO_COLOR", "Exit codes"):
        assert words in out.stdout


def test_a_bad_target_is_a_usage_error() -> None:
    out = _run("svc/llama")
    assert out.returncode == 2
    assert "name a pod, deploy/NAME or sts/NAME" in out.stderr


def test_no_kubeconfig_says_where_it_looked(tmp_path: Path) -> None:
    out = _run("--kubeconfig", str(tmp_path / "missing"), "deploy/x")
    assert out.returncode == 1
    assert out.stderr.startswith(f"error: cannot load a kubeconfig from {tmp_path / 'missing'}")


def test_an_unknown_context_is_an_error(tmp_path: Path) -> None:
    cfg = _kubeconfig(tmp_path / "config", "https://127.0.0.1:1")
    out = _run("--kubeconfig", str(cfg), "--context", "nope")
    assert out.returncode == 1
    assert "error: cannot load a kubeconfig" in out.stderr and "nope" in out.stderr


def test_an_api_server_that_is_not_there_is_named(tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{_closed_port()}"
    cfg = _kubeconfig(tmp_path / "config", server)
    out = _run("--kubeconfig", str(cfg), "deploy/llama")
    assert out.returncode == 1, out.stderr
    assert out.stderr.startswith(f"error: cannot reach the API server at {server}")
    assert "Traceback" not in out.stderr


def test_a_bad_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("stuck_pod: {engine_containers: 7}\n")
    out = _run("--policy", str(policy), "deploy/x")
    assert out.returncode == 2
    assert f"policy file {policy}" in out.stderr
