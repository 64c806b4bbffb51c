"""Issue 10 #4 and #1 against `remediator serve` as a process: a 202 survives `kill -9`, and
a full disk is a 503 that /readyz and /healthz report, and recover from when space is freed.

The full disk is real: serve runs in a private mount namespace (`unshare -rm`, no privilege
needed) with its state file on a 256 KiB tmpfs; the test fills and frees that filesystem
through /proc/PID/root. Skipped where user namespaces are not allowed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from tests.runtime.conftest import POLICY, WEBHOOK_TOKEN, stuck_pod

REPO = Path(__file__).resolve().parents[2]
# Every pod here is its own incident: the rate limit must not be what decides how many act.
POLICY_ALL = POLICY + "guardrails:\n  rate_limit: {per_minute: 600, burst: 50}\n"


def closed_port_url() -> str:
    """Argo where nothing listens: decisions stay pending in the outbox, where we read them."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@dataclass
class Serve:
    proc: subprocess.Popen[bytes]
    port: int
    lines: list[dict[str, object]] = field(default_factory=list)

    def named(self, msg: str) -> list[dict[str, object]]:
        return [line for line in self.lines if line.get("msg") == msg]


def _read(proc: subprocess.Popen[bytes], lines: list[dict[str, object]]) -> None:
    assert proc.stderr is not None
    for raw in proc.stderr:
        with suppress(ValueError):
            lines.append(json.loads(raw))


@contextmanager
def serve(state_db: str, tmp: Path, prefix: tuple[str, ...] = ()) -> Iterator[Serve]:
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY_ALL)
    argv = [sys.executable, "-m", "remediator.serve", "--policy", str(policy)]
    argv += ["--listen", "127.0.0.1:0", "--state-db", state_db, "--no-leader-election"]
    argv += ["--warmup-daemonset", "", "--argo-server", closed_port_url()]
    env = {
        **os.environ,
        "REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
        "ARGO_TOKEN": "argo-token",
        "REMEDIATOR_INFERENCE_NAMESPACES": "",
    }
    proc = subprocess.Popen([*prefix, *argv], cwd=REPO, env=env, stderr=subprocess.PIPE)
    lines: list[dict[str, object]] = []
    threading.Thread(target=_read, args=(proc, lines), daemon=True).start()
    try:
        deadline = time.monotonic() + 60
        while not (started := [x for x in lines if x.get("msg") == "service started"]):
            assert proc.poll() is None and time.monotonic() < deadline, lines
            time.sleep(0.05)
        yield Serve(proc, int(str(started[0]["port"])), lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def watch_event(name: str) -> bytes:
    """A stuck vLLM pod, known only from this webhook; its budget lapses after the 202."""
    pod = stuck_pod(name)
    pod["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
    pod["metadata"]["creationTimestamp"] = pod["status"]["conditions"][0]["lastTransitionTime"]
    owner = pod["metadata"]["ownerReferences"][0]  # its own workload: no blast radius between
    owner["name"], owner["uid"] = name, str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    return orjson.dumps({"type": "ADDED", "object": pod})


def post(port: int, body: bytes) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/events",
        data=body,
        headers={"Authorization": f"Bearer {WEBHOOK_TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
            return int(resp.status), str(json.loads(resp.read())["detail"])
    except urllib.error.HTTPError as exc:
        return int(exc.code), str(json.loads(exc.read())["detail"])


def decided(state_db: str) -> list[str]:
    with closing(sqlite3.connect(state_db)) as db:  # closed, not left to the collector
        found = db.execute("SELECT json_extract(decision, '$.target') FROM outbox ORDER BY id")
        return [str(t) for (t,) in found.fetchall()]


def copied(inside: Path, to: Path) -> list[str]:
    """`decided` on a copy: SQLite resolves /proc/PID/root to the host's own path. Each look
    copies into a folder of its own: what an earlier look's reader left there (its WAL index,
    its checkpoint of the copy) would hide what was written since."""
    to = to / uuid.uuid4().hex
    to.mkdir(parents=True)
    for name in ("state.db", "state.db-wal"):
        with suppress(FileNotFoundError):
            shutil.copyfile(inside / name, to / name)
    with suppress(sqlite3.DatabaseError):
        return decided(str(to / "state.db"))
    return []


def until(check: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kill_9_right_after_each_202_loses_nothing_and_doubles_nothing(tmp_path: Path) -> None:
    """Six processes, each killed (SIGKILL) as soon as its 202 arrives; then one that lives.
    Every pod is decided on, once: the inbox fed them again after each kill."""
    state_db = str(tmp_path / "state" / "state.db")
    pods = [f"vllm-kill-{i}" for i in range(6)]
    for name in pods:
        with serve(state_db, tmp_path) as s:
            assert post(s.port, watch_event(name)) == 202
            s.proc.kill()
            s.proc.wait(30)
    with serve(state_db, tmp_path) as s:
        until(lambda: sorted(decided(state_db)) == pods)
        time.sleep(1.5)  # another check interval: nothing decided twice
        assert sorted(decided(state_db)) == pods
        assert s.named("stored inputs fed again")


@pytest.fixture
def tiny_fs_ok() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces not allowed: {probe.stderr.decode()[:200]}")


def test_a_full_disk_is_a_503_reported_once_and_recovered(tmp_path: Path, tiny_fs_ok: None) -> None:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    state_db = str(mnt / "state.db")
    mount = f'mount -t tmpfs -o size=256k none {mnt} && exec "$@"'
    prefix = ("unshare", "-rm", "sh", "-c", mount, "sh")
    with serve(state_db, tmp_path, prefix) as s:
        assert post(s.port, watch_event("vllm-before")) == 202
        inside = Path(f"/proc/{s.proc.pid}/root") / str(mnt).lstrip("/")
        assert (inside / "state.db").exists()
        filler = inside / "filler"
        with suppress(OSError), filler.open("wb") as f:  # ENOSPC ends it
            for _ in range(256):
                f.write(b"\0" * 4096)
                f.flush()
        codes = [post(s.port, watch_event(f"vllm-full-{i}")) for i in range(20)]
        assert set(codes) == {503}, codes
        ready, why = get(s.port, "/readyz")
        assert ready == 503 and "disk is full" in why, why
        health, why = get(s.port, "/healthz")
        assert health == 503 and "disk is full" in why, why
        # once per part of the file that failed: the inbox (the webhooks), and the outbox too
        # when a decision fell due while the disk was full; each with the disk's own error
        failed = s.named("state file write failed")
        parts = [line["part"] for line in failed]
        assert "inbox" in parts and len(parts) == len(set(parts)), failed
        assert all("full" in line["error"] for line in failed), failed
        assert len(s.named("webhook not accepted: 503")) == 1

        filler.unlink()  # space again: noticed without traffic
        until(lambda: get(s.port, "/readyz")[0] == 200 and get(s.port, "/healthz")[0] == 200)
        assert s.named("state file writable again")
        assert post(s.port, watch_event("vllm-after")) == 202
        until(lambda: {"vllm-before", "vllm-after"} <= set(copied(inside, tmp_path / "copy")))
    assert s.proc.returncode == 0


@pytest.mark.parametrize("how", ["the file", "its directory"])
def test_a_state_file_deleted_while_running_is_recreated_and_loses_nothing(
    how: str, tmp_path: Path
) -> None:
    """Issue 18 #8: with the state file deleted under serve, 5 webhooks were answered 202 into
    the deleted file, and after kill -9 and a restart none was decided. Now the open copy is
    written back to the path and nothing is lost: not what was stored before the delete,
    not what a sender stored (after a 503 and a retry) after it."""
    folder = tmp_path / "state"
    state_db = str(folder / "state.db")
    before = ["vllm-del-0", "vllm-del-1"]
    after = [f"vllm-del-{i}" for i in range(2, 7)]
    with serve(state_db, tmp_path) as s:
        for name in before:
            assert post(s.port, watch_event(name)) == 202
        until(lambda: sorted(decided(state_db)) == before)
        if how == "the file":
            for suffix in ("", "-wal", "-shm"):  # rm -f state.db*
                Path(state_db + suffix).unlink()
        else:
            shutil.rmtree(folder)
        codes = []
        for name in after:  # as a sender does: again until it is a 2xx
            until(
                lambda name=name: codes.append(post(s.port, watch_event(name))) or codes[-1] == 202
            )
        until(lambda: s.named("state file recreated from the open copy"))
        assert len(s.named("state file deleted while running: recreating it")) == 1
        assert set(codes) <= {202, 503}
        s.proc.kill()
        s.proc.wait(30)
    with serve(state_db, tmp_path) as s:
        until(lambda: sorted(decided(state_db)) == sorted(before + after))
