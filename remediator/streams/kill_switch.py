"""The kill switch on Kafka: the worker that holds the guard reads serve's file.

Every worker mounts the same file (the ConfigMap key, as serve's pods do); the guard agent
reads it before it judges a batch, at most every `every_s` (`runtime/kill_switch_file.py`:
a file it cannot read clearly counts as on), and the guard's `kill_switch` stage holds
every decision while it says on, as in serve. A worker that takes the guard over reads the
file again before its first batch: the switch is the file's, never a stale changelog's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Gauge

from remediator.logfields import get_logger
from remediator.runtime.kill_switch_file import read_switch

log = get_logger("remediator.worker")

EVERY_S = 1.0


class SwitchPoll:
    """`now()`: (engaged, note), the file read again when `every_s` has passed."""

    def __init__(
        self,
        path: str,
        registry: CollectorRegistry,
        every_s: float = EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.every_s = every_s
        self._monotonic = monotonic
        self._read_at: float | None = None
        self._said: tuple[bool, str] = (True, "not read yet")
        self._engaged: bool | None = None
        self._unclear: str | None = None
        self.engaged = Gauge("remediator_kill_switch_engaged",
                             "1 while the kill-switch file says on (or cannot be read clearly).",
                             registry=registry)  # fmt: skip
        self.unclear = Gauge("remediator_kill_switch_unclear",
                             "1 while the kill-switch file cannot be read, decoded or "
                             "understood (then the switch is on).", registry=registry)  # fmt: skip

    def now(self) -> tuple[bool, str]:
        now = self._monotonic()
        if self._read_at is not None and now - self._read_at < self.every_s:
            return self._said
        self._read_at = now
        reading = read_switch(self.path)
        if reading.unclear != self._unclear:
            if reading.unclear is not None:
                log.error("kill switch file unclear: engaged",
                          extra={"path": self.path, "error": reading.unclear})  # fmt: skip
            self._unclear = reading.unclear
            self.unclear.set(0 if reading.unclear is None else 1)
        if reading.engaged != self._engaged:
            first = self._engaged is None
            if not (first and not reading.engaged):
                word = "engaged" if reading.engaged else "off"
                log.warning("kill switch " + word, extra={"path": self.path})
            self._engaged = reading.engaged
            self.engaged.set(1 if reading.engaged else 0)
        self._said = (reading.engaged, f"{self.path} says {reading.said}")
        return self._said
