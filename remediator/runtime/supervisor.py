"""Supervision of the runtime's loop tasks: never a process half alive.

A task that raises is logged with its exception, counted and restarted after a pause that
doubles from `restart_after_s`; one that fails `max_restarts` times within
`restart_window_s` gives up: `failure` says why and `give_up` stops the runtime, so serve
exits non-zero and the orchestrator restarts the process. The loops never end by
themselves, so an end is a failure too (unless the runtime is stopping). Time is the
injected clock's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import Counter

from remediator.logfields import get_logger
from remediator.runtime.clock import Clock

log = get_logger("remediator.runtime")


@dataclass(frozen=True, slots=True)
class Restarts:
    after_s: float = 1.0  # first pause before a failed task is restarted; doubles
    most: int = 5  # failures within window_s that stop the process
    window_s: float = 300.0


class Supervisor:
    def __init__(
        self,
        clock: Clock,
        restarts: Restarts,
        counter: Counter,
        stopping: asyncio.Event,
    ) -> None:
        self.clock = clock
        self.restarts = restarts
        self.counter = counter  # remediator_task_restarts_total{task}
        self.stopping = stopping  # set to stop the runtime; set by it when it stops
        self.restarting: dict[str, str] = {}  # task -> why, while it waits to restart
        self.failure: str | None = None  # why supervision stopped the runtime

    def status(self) -> str | None:
        """Why the runtime is not healthy, or None."""
        if self.failure is not None:
            return self.failure
        if self.restarting:
            return "; ".join(f"task {n} failed: {why}" for n, why in self.restarting.items())
        return None

    async def run(self, name: str, make: Callable[[], Awaitable[None]]) -> None:
        """Run `make()` again each time it fails; give up when it keeps failing."""
        failed: deque[float] = deque()
        while True:
            try:
                await make()
                if self.stopping.is_set():
                    return  # told to finish (the inbox writer)
                raise RuntimeError(f"task {name} ended")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                pause = self._failed(name, f"{type(exc).__name__}: {exc}", failed)
                if pause is None:
                    return
            await self.clock.sleep(pause)
            self.restarting.pop(name, None)

    def _failed(self, name: str, why: str, failed: deque[float]) -> float | None:
        """Log and count one failure; the pause before the restart, or None to give up."""
        r = self.restarts
        now = self.clock.monotonic()
        failed.append(now)
        while failed and failed[0] < now - r.window_s:
            failed.popleft()
        if len(failed) >= r.most:
            self.failure = f"task {name} failed {len(failed)} times; last: {why}"
            log.critical("task keeps failing: stopping", extra={"task": name}, exc_info=True)
            self.stopping.set()
            return None
        pause: float = r.after_s * 2.0 ** (len(failed) - 1)
        log.error(
            "task failed, restarting",
            extra={"task": name, "error": why, "restart_in_s": pause},
            exc_info=True,
        )
        self.counter.labels(name).inc()
        self.restarting[name] = why
        return pause
