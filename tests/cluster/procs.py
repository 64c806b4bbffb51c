"""The processes the test environment starts (control plane, Argo): each recorded by PID in its
owner's state file and stopped by that PID, after checking it still runs our binary (PIDs get
reused), never by name. Stdlib only, like its callers. `Supervised` is the lifecycle both
owners share (state file, stop, down, status); each says only what it runs and where.

    procs = Procs(state["pids"], logs, exe=lambda name: bin / name, save=write_state)
    procs.start("etcd", args, cwd=home)       # log: logs/etcd.log
    procs.wait(check, 90, "etcd health")      # fails early, with the log tail, if one exits
    procs.stop("etcd")
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar


class ClusterError(RuntimeError):
    """The test environment could not be brought up (the message says which part, and why)."""


@dataclass
class Procs:
    pids: dict[str, int]  # the owner's state: name -> PID, written by `save`
    logs: Path
    exe: Callable[[str], Path]  # the binary a component runs
    save: Callable[[], None]

    def start(
        self, name: str, args: list[str], *, cwd: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                [str(self.exe(name)), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the caller's terminal does not reach it
                cwd=cwd,
                env=env,
            )
        self.pids[name] = proc.pid
        self.save()

    def stop(self, name: str, sig: int = signal.SIGTERM, wait: float = 15.0) -> None:
        """Stop one component by its recorded PID; SIGKILL if it outlives `wait` seconds."""
        pid = self.pids.pop(name, None)
        if pid is not None and self.ours(pid, name):
            os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
                while alive(pid):
                    time.sleep(0.05)
        self.save()

    def ours(self, pid: int, name: str) -> bool:
        """True when the PID is alive and still runs the binary we started."""
        if not alive(pid):
            return False
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        except OSError:
            return False
        return cmd == str(self.exe(name))

    def running(self) -> bool:
        return any(self.ours(pid, name) for name, pid in self.pids.items())

    def states(self) -> dict[str, str]:
        return {n: "running" if self.ours(pid, n) else "dead" for n, pid in self.pids.items()}

    def wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `check` until true; fail at once, with its log's tail, if a component exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [n for n, pid in self.pids.items() if not alive(pid)]
            if dead:
                raise ClusterError(
                    f"{', '.join(dead)} exited while waiting for {what}; see "
                    f"{self.logs / (dead[0] + '.log')}:\n{self.tail(dead[0])}"
                )
            if check():
                return
            time.sleep(0.2)
        raise ClusterError(
            f"timed out after {timeout:.0f} s waiting for {what}; logs in {self.logs}"
        )

    def tail(self, name: str, lines: int = 15) -> str:
        try:
            text = (self.logs / f"{name}.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours is dead: reap it
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False


class Supervised:
    """An owner of processes: its state (ports, `pids`, `bin`) in a JSON file, its components
    started in `COMPONENTS` order and stopped in reverse. Subclasses (dataclasses with a
    `state` field) give `state_file` and `logs`, and may map a component to its binary."""

    COMPONENTS: ClassVar[tuple[str, ...]] = ()
    state: dict[str, Any]

    @property
    def state_file(self) -> Path:
        raise NotImplementedError

    @property
    def logs(self) -> Path:
        raise NotImplementedError

    def _exe(self, name: str) -> Path:
        return Path(self.state.get("bin", "")) / name

    def _load(self) -> None:
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())

    def _save(self) -> None:
        if self.state:
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps(self.state, indent=2))

    @property
    def procs(self) -> Procs:
        return Procs(self.state.setdefault("pids", {}), self.logs, self._exe, self._save)

    @property
    def pids(self) -> dict[str, int]:
        return dict(self.state.get("pids", {}))

    def running(self) -> bool:
        return self.procs.running()

    def stop(self, name: str, sig: int = signal.SIGTERM, wait: float = 15.0) -> None:
        """Stop one component we started, by its recorded PID (checked against its command line)."""
        self.procs.stop(name, sig, wait)

    def down(self) -> None:
        for name in reversed(self.COMPONENTS):
            self.stop(name)
        if self.state_file.exists():
            self.state_file.unlink()

    def _wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        self.procs.wait(check, timeout, what)

    def _bring_up(self, state: dict[str, Any], start: Callable[[], None]) -> None:
        """Start from `state` (no PIDs yet) with `start`; on any failure stop what started."""
        if self.running():
            where = self.state_file.parent
            raise ClusterError(f"{type(self).__name__} already runs from {where} ({self.pids})")
        started = time.monotonic()
        self.state = state
        try:
            start()
        except BaseException:
            self.down()
            raise
        self.state["ready_s"] = round(time.monotonic() - started, 1)
        self._save()
