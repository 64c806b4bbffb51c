"""The embedded runtime: one process, one asyncio loop, one Session.

    sources ──▶ queue ──▶ Driver (session, timers, kill switch) ──▶ outbox (SQLite)
                                                                       │
    leadership ──▶ OutboxWorker (leader only): rows ──carry──▶ executors (Argo, Slack)

This module only wires the two halves together, supervises their tasks and answers the
probes. The session is only ever touched from the loop's thread, so it needs no lock. A
decision is written to the outbox, with the guard state that let it through, before
anything acts on it.

Every replica writes every decision let through to its own outbox (state is per
replica); only the leader executes rows. A replica that becomes leader executes its
pending rows written within `fresh_for_s` and marks older ones `expired`. Rows it
inherited this way say so in Slack ("taken over from <old holder>"): the old leader
may already have acted, which Argo answers with 409 (done); its Slack messages are
looked for in the channel before they are posted (`runtime/worker.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from remediator.contract.decision import Suppressed
from remediator.executors.protocol import Executor, WouldHave
from remediator.executors.recorder import Recorder
from remediator.inputs.records import Input
from remediator.logfields import get_logger
from remediator.runtime.clock import Clock, SystemClock, wait
from remediator.runtime.driver import Driver
from remediator.runtime.leader import Leadership
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox
from remediator.runtime.worker import OutboxWorker, WorkerSettings
from remediator.session import Session

log = get_logger("remediator.runtime")


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    max_tick_s: float = 1.0  # the timer wakes at least this often
    kill_switch_file: str | None = None
    kill_switch_poll_s: float = 5.0
    executor_poll_s: float = 2.0  # open outbox rows are re-examined at least this often
    workflow_poll_s: float = 5.0  # a running workflow is looked at no more often than this
    stuck_after_s: float = 30.0  # /healthz fails when the timer has not ticked for this long
    fresh_for_s: float = 600.0  # a new leader executes pending rows younger than this
    forget_after_s: float = 600.0  # a deleted pod's timeline is kept this long, then pruned
    outbox_retention_s: float = 7 * 86400.0  # closed outbox rows are deleted after this


class Runtime:
    def __init__(
        self,
        session: Session,
        outbox: Outbox,
        leader: Leadership,
        metrics: RuntimeMetrics,
        *,
        cluster: Executor | None = None,
        notifier: Executor | None = None,
        settings: RuntimeSettings | None = None,
        clock: Clock | None = None,
        sources_ready: Callable[[], tuple[bool, str]] = lambda: (True, "no watches"),
    ) -> None:
        self.session = session
        self.outbox = outbox
        self.leader = leader
        self.metrics = metrics
        self.settings = s = settings or RuntimeSettings()
        self.clock = clock or SystemClock()
        self._sources_ready = sources_ready
        self._queue: asyncio.Queue[list[Input]] = asyncio.Queue()
        self._work = asyncio.Event()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.worker = OutboxWorker(
            outbox,
            cluster or Recorder(),
            notifier,
            self.clock,
            metrics,
            leader.identity,
            WorkerSettings(
                poll_s=s.workflow_poll_s,
                fresh_for_s=s.fresh_for_s,
                retention_s=s.outbox_retention_s,
            ),
            is_leader=leader.is_leader,
        )
        self.driver = Driver(
            session,
            outbox,
            self.clock,
            metrics,
            leading=leader.is_leader,
            wake_worker=self._work.set,
            simulated=self._would_have,
            kill_switch_file=s.kill_switch_file,
            forget_after_s=s.forget_after_s,
        )
        self._leader_gauge = metrics.leader.labels(leader.identity)
        leader.subscribe(self._on_leadership)
        self._restore_guard_state()

    def _restore_guard_state(self) -> None:
        state = self.outbox.guard_state()
        if state is not None:
            self.session.restore_guard_state(state)
            log.info("guard state restored", extra={"open_rows": len(self.outbox.open_rows())})

    # --- intake (the loop's thread; accept_threadsafe from watch threads) -----------------
    def accept(self, inputs: list[Input], source: str) -> None:
        self._queue.put_nowait(inputs)
        self.metrics.queue_depth.set(self._queue.qsize())

    def accept_threadsafe(self, inputs: list[Input]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.accept, inputs, "kube")

    def healthy(self) -> tuple[bool, str]:
        dead = [t.get_name() for t in self._tasks if t.done() and not self._stop.is_set()]
        if dead:
            return False, f"task(s) ended: {', '.join(dead)}"
        idle = self.clock.monotonic() - self.driver.last_tick
        if idle > self.settings.stuck_after_s:
            return False, f"timer has not ticked for {idle:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if self._stop.is_set():
            return False, "shutting down"
        if self._loop is None:
            return False, "starting"
        return self._sources_ready()

    def stop(self) -> None:
        self._stop.set()

    # --- the run -----------------------------------------------------------------------
    async def run(self) -> None:
        """Until stop(): intake, timer, kill switch, leadership and the outbox worker."""
        self._loop = asyncio.get_running_loop()
        self.driver.apply_kill_switch()
        s = self.settings
        parts = {
            "consume": self.driver.consume(self._queue),
            "timer": self.driver.timer(s.max_tick_s),
            "kill-switch": self.driver.poll_kill_switch(s.kill_switch_poll_s),
            "leader": self.leader.run(self._stop),
            "executor": self._execute(),
        }
        self._tasks = [asyncio.create_task(c, name=n) for n, c in parts.items()]
        self._on_leadership(self.leader.is_leader(), None)  # `Always` leads from the start
        self._work.set()  # resume open rows at once
        log.info("runtime started", extra={"leader": self.leader.is_leader()})
        try:
            await self._stop.wait()
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.worker.close()
            await self.leader.release()  # nothing executes any more: a standby may take over
            log.info("runtime stopped", extra={"open_rows": len(self.outbox.open_rows())})

    def _on_leadership(self, leading: bool, previous: str | None) -> None:
        self._leader_gauge.set(1 if leading else 0)
        self.worker.lead(leading, previous)
        if leading:
            self._work.set()

    def _would_have(self, held: Suppressed) -> None:
        self.worker.note(WouldHave(held.decision, held.reason))

    async def _execute(self) -> None:
        while True:
            await wait(self._work, self.settings.executor_poll_s, self.clock)
            self._work.clear()
            leading = self.leader.is_leader()
            self._leader_gauge.set(1 if leading else 0)
            if leading != self.worker.leading:  # a Lease that lapsed without a callback
                self.worker.lead(leading, None)
            await self.worker.step()
