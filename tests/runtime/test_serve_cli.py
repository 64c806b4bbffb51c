"""`remediator serve` as a process: --help teaches, SIGTERM stops it, bad config is named."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.logcheck import DIED
from tests.runtime.conftest import POLICY, WEBHOOK_TOKEN

REPO = Path(__file__).resolve().parents[2]


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "remediator.serve", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_help_names_every_option_and_env_var() -> None:
    proc = serve("--help")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    for word in (
        "--policy",
        "--listen",
        "--state-db",
        "--namespaces",
        "--kubeconfig",
        "--argo-server",
        "--argo-namespace",
        "--slack-channel",
        "--dry-run",
        "--kill-switch-file",
        "--no-leader-election",
        "--leader-election",
        "--lease-name",
        "--lease-duration",
        "--renew-deadline",
        "--retry-period",
        "--state-configmap",
        "--no-shared-state",
        "REMEDIATOR_STATE_SHARE_INTERVAL",
        "REMEDIATOR_LEASE_NAME",
        "POD_NAME",
        "POD_NAMESPACE",
        "REMEDIATOR_IMAGE",
        "REMEDIATOR_INFERENCE_NAMESPACES",
        "REMEDIATOR_KILL_SWITCH_FILE",
        "--inbox-max-bytes",
        "REMEDIATOR_INBOX_MAX_BYTES",
        "Exit codes",
        "REMEDIATOR_WEBHOOK_TOKEN",
        "ARGO_TOKEN",
        "SLACK_BOT_TOKEN",
        "Example",
    ):
        assert word in out, word


def serve_dry(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    """serve in a dry run on loopback, webhooks only, with its own state file."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return serve(
        "--policy",
        str(policy),
        "--listen",
        "127.0.0.1:0",
        "--state-db",
        str(tmp_path / "s.db"),
        "--dry-run",
        "--no-leader-election",
        "--warmup-daemonset",
        "",
        *args,
        env={
            "REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
            "REMEDIATOR_INFERENCE_NAMESPACES": "",
            "REMEDIATOR_LOG_LEVEL": "DEBUG",
        },
    )


def started(proc: subprocess.Popen[str]) -> tuple[int, list[str]]:
    """The port serve listens on, once it says so, and the lines it logged until then."""
    assert proc.stderr is not None
    port = None
    deadline = time.monotonic() + 60
    lines = []
    while port is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        doc = json.loads(line)
        if doc["msg"] == "service started":
            port = doc["port"]
    assert port, lines
    return int(port), lines


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def stop(proc: subprocess.Popen[str], lines: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """Signal serve; every line it logged is one JSON object and none says something died."""
    proc.send_signal(sig)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert "service stopped" in rest
    for line in rest.splitlines():
        json.loads(line)  # every log line is one JSON object
    for died in DIED:  # no log call raised, no task died unobserved
        assert died not in "".join(lines) + rest
    return lines + rest.splitlines()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_gracefully(sig: signal.Signals, tmp_path: Path) -> None:
    """SIGHUP (a closed terminal, `kill -HUP`) killed serve at once (issue 18 #9): now it
    stops it as SIGTERM does, the state file closed and the exit code 0."""
    proc = serve_dry(tmp_path)
    port, lines = started(proc)
    assert get(port, "/healthz")[0] == 200
    stop(proc, lines, sig)


def test_serve_starts_and_runs_with_an_undecodable_kill_switch_on(tmp_path: Path) -> None:
    """Issue 18 #3: "on" in UTF-16 was a UnicodeDecodeError at start: serve exited 1 and would
    not start. Now it starts, the switch on, and says why where an SRE looks."""
    switch = tmp_path / "kill-switch"
    switch.write_bytes(b"\xfe\xff\x00o\x00")  # a UTF-16-BE mark, then half of "on"
    proc = serve_dry(tmp_path, "--kill-switch-file", str(switch))
    port, lines = started(proc)
    status, body = get(port, "/readyz")
    assert status == 200 and b"kill switch engaged" in body, body
    metrics = get(port, "/metrics")[1].decode()
    assert "remediator_kill_switch_engaged 1.0" in metrics
    assert "remediator_kill_switch_unclear 1.0" in metrics
    logged = [json.loads(x) for x in stop(proc, lines)]
    assert [x["msg"] for x in logged].count("kill switch file unclear: engaged") == 1


def test_bad_policy_is_named_and_exits_nonzero(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("stuck_pod:\n  checks: many\n")
    proc = serve(
        "--policy",
        str(policy),
        "--dry-run",
        "--no-leader-election",
        env={"REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN},
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "checks" in err


def test_in_a_cluster_election_needs_the_lease_namespace() -> None:
    env = {
        "REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "POD_NAME": "remediator-0",
        "POD_NAMESPACE": "",
    }
    proc = serve("--dry-run", env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "POD_NAMESPACE" in err


def test_contradictory_election_flags_are_refused() -> None:
    env = {"REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN}
    proc = serve("--dry-run", "--leader-election", "--no-leader-election", env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "contradict" in err


def test_bad_lease_timings_are_refused() -> None:
    env = {"REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN, "POD_NAME": "r-0", "POD_NAMESPACE": "r"}
    proc = serve("--dry-run", "--lease-duration", "5", "--renew-deadline", "8", env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "renew deadline" in err


def test_a_bad_remediator_image_is_refused_at_start() -> None:
    env = {"REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN, "REMEDIATOR_IMAGE": "Not An Image!"}
    proc = serve("--dry-run", "--no-leader-election", env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "REMEDIATOR_IMAGE" in err


def _junk(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 32)


def _text(path: Path) -> None:
    path.write_text("state.db was here\n" * 100)


def _corrupt(path: Path) -> None:
    """A real SQLite file whose pages after the header were overwritten."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE x (a)")
        db.executemany("INSERT INTO x VALUES (?)", [("y" * 500,)] * 200)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xa5" * (len(data) - 100))


def _foreign(path: Path) -> None:
    """Another program's SQLite file, with a table of the same name."""
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE outbox (a)")


def _guard(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE guard_state (id INTEGER PRIMARY KEY, state TEXT, updated_at REAL)")
        db.execute("INSERT INTO guard_state VALUES (1, '{not json', 0)")


def _directory(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize(
    "make", [_junk, _text, _corrupt, _foreign, _guard, _directory], ids=lambda f: f.__name__[1:]
)
def test_a_state_file_it_cannot_use_is_named_with_exit_code_3(
    make: Callable[[Path], None], tmp_path: Path
) -> None:
    """Issue 18 #8: a garbage state file at start was a traceback. Now one line says which
    file and why, the file is left where it is (to look at), and serve exits 3."""
    state = tmp_path / "s.db"
    make(state)
    inode, before = state.stat().st_ino, state.read_bytes() if state.is_file() else b""
    proc = serve_dry(tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    assert f"state file {state} cannot be used" in err and "--state-db" in err, err
    assert state.stat().st_ino == inode  # not replaced by a fresh one
    if state.is_file() and not before.startswith(b"SQLite format 3"):
        assert state.read_bytes() == before  # SQLite refused it before writing anything
