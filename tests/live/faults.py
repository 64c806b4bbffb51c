"""Two faults the real control plane cannot be asked for, made around it, for the skew and
pause tests (issue 18): a node whose kubelet clock is off, and a network gap between serve and
the API server. Both are real processes and sockets on 127.0.0.1; nothing is imitated inside
serve or the API server.

- `SkewedKwok`: a second kwok process that plays the kubelet of nodes labelled
  `type=<label>`, with the repo's stages rewritten so that every time it stamps (`Now`) is
  shifted: its pods' starts, Ready and Initialized are on that node's clock, and the API server
  stamps its writes (`managedFields`) on its own, as with a real kubelet whose clock is off.
  kwok records Events with its own recorder's time, which the stages cannot shift, so this
  kwok records none: its pods are told by their status alone.
- `Relay`: a TCP relay serve talks to instead of the API server. `pause()` stops moving bytes
  both ways (connections stay open, new ones wait): a watch gap, as a partition makes one.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

_EVENT = re.compile(r"^(\s*)event:")


def shifted_stages(text: str, shift: str) -> str:
    """kwok stage text with every `Now` moved by `shift` (a Go duration with its sign, e.g.
    "+1h", "-1h": sprig's dateModify) and every `event:` block left out."""
    now = f'(now | dateModify "{shift}" | date "2006-01-02T15:04:05Z07:00")'
    out: list[str] = []
    skipping: int | None = None
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if skipping is not None:
            if line.strip() and indent <= skipping:
                skipping = None
            else:
                continue
        m = _EVENT.match(line)
        if m:
            skipping = len(m.group(1))
            continue
        out.append(re.sub(r"\bNow\b", now, line))
    return "\n".join(out) + "\n"


class SkewedKwok:
    """A kwok process for the nodes labelled `type=<label>`, its clock `shift` off."""

    def __init__(self, raw: Any, label: str, shift: str, port: int) -> None:
        self.raw, self.label, self.shift, self.port = raw, label, shift, port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SkewedKwok:
        home: Path = raw_home(self.raw)
        config = home / f"kwok-{self.label}.yaml"
        config.write_text(shifted_stages((home / "kwok.yaml").read_text(), self.shift))
        binary = Path(self.raw.state["bin"]) / "kwok"
        log = (home / "logs" / f"kwok-{self.label}.log").open("ab")
        self.proc = subprocess.Popen(
            [
                str(binary),
                f"--kubeconfig={home / 'kwok.kubeconfig'}",
                f"--config={config}",
                f"--manage-nodes-with-label-selector=type={self.label}",
                f"--server-address=127.0.0.1:{self.port}",
                "--node-lease-duration-seconds=40",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=home,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


def raw_home(raw: Any) -> Path:
    return Path(raw.home)


class Relay:
    """127.0.0.1:port → 127.0.0.1:upstream, byte for byte (TLS passes through untouched)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.flowing = threading.Event()
        self.flowing.set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        self._accepter = threading.Thread(target=self._accept, daemon=True, name="relay")
        self._accepter.start()

    def pause(self) -> None:
        self.flowing.clear()

    def resume(self) -> None:
        self.flowing.set()

    def close(self) -> None:
        self._closed.set()
        self.flowing.set()
        for s in [self._server, *self._socks]:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._pipe, args=(client,), daemon=True).start()

    def _pipe(self, client: socket.socket) -> None:
        self.flowing.wait()  # a connection made during the gap waits for it to end
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        self._socks += [client, server]
        peers = {client: server, server: client}
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                for s in ready:
                    self.flowing.wait()  # paused: nothing moves, nothing is lost
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except OSError:
            return
        finally:
            for s in (client, server):
                with contextlib.suppress(OSError):
                    s.close()
