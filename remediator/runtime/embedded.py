"""The embedded runtime: one process, one asyncio loop, one Session.

    sources ──▶ backlog ──▶ Driver (session, timers, kill switch) ──▶ outbox (SQLite)
    POST /events ──▶ inbox ─┘ (stored first)                          │
    leadership ──▶ Acting (leader only): rows ──carry──▶ executors (Argo, Slack)

This module only wires the two halves together, supervises their tasks and answers the
probes. Webhook inputs are written to the inbox (the state file) before `take` says yes; a
restart feeds the inbox's kept rows again (runtime/inbox.py says which and why).

Every task runs under `runtime/supervisor.py`: restarted when it fails, the runtime stopped
(`failure` set, serve exits non-zero) when it keeps failing. A state file that refuses
writes is not a task failure: the writers keep what they could not write and try again, and
`/healthz` and `/readyz` say so until a write succeeds.

The session is only ever touched from the loop's thread, so it needs no lock. A decision is
written to the outbox, with the guard state that let it through, before anything acts on it.

Every replica writes every decision let through to its own outbox (state is per
replica); only the leader executes rows. A replica that becomes leader executes its
pending rows written within `fresh_for_s` and marks older ones `expired`. Rows it
inherited this way say so in Slack ("taken over from <old holder>"): the old leader
may already have acted, which Argo answers with 409 (done); its Slack messages are
looked for in the channel before they are posted (`runtime/worker.py`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from remediator.contract.decision import Suppressed
from remediator.executors.protocol import Executor, WouldHave
from remediator.executors.recorder import Recorder
from remediator.inputs.decode import decode
from remediator.inputs.records import Input, InputError
from remediator.logfields import get_logger
from remediator.runtime.backlog import Backlog
from remediator.runtime.clock import Clock, SystemClock, wait
from remediator.runtime.driver import Driver
from remediator.runtime.inbox import Inbox, InboxWriter, StoreFailed, StoreHealth
from remediator.runtime.leader import Leadership
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.statefile import StateFile
from remediator.runtime.supervisor import Restarts, Supervisor
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.session import Session

log = get_logger("remediator.runtime")
_WATCHED = frozenset({"kube", "probe"})  # the rest are webhooks: their pods are bounded


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
    backlog_limit: int = 10_000  # inputs waiting for the core; webhooks get 503 beyond it
    store_retry_s: float = 1.0  # a state file that refused a write is tried again this often
    restarts: Restarts = Restarts()  # when a failed task is restarted, when it stops all
    outbox_retention_s: float = 7 * 86400.0  # closed outbox rows are deleted after this
    workflow_start_timeout_s: float = 300.0  # a workflow still Pending this long is told
    behind_unready_s: float = 30.0  # pod deletions held this long (behind): /readyz fails


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
        inbox: Inbox | None = None,
        sources_behind: Callable[[], str | None] | None = None,
    ) -> None:
        self.session = session
        self.outbox = outbox
        self.leader = leader
        self.metrics = metrics
        self.settings = s = settings or RuntimeSettings()
        self.clock = clock or SystemClock()
        self._sources_ready = sources_ready
        self.backlog = Backlog(s.backlog_limit)
        self.store = StoreHealth()
        self.inbox = inbox  # None: webhooks are queued in memory only (not durable)
        self.writer: InboxWriter[list[Input]] | None = None
        self.state_file = StateFile(outbox, inbox, self.store)  # deleted under us: recreated
        if inbox is not None:
            self.writer = InboxWriter(inbox, self.store, self.clock, self._landed, s.store_retry_s)
        self._work = asyncio.Event()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.supervisor = Supervisor(self.clock, s.restarts, metrics.task_restarts, self._stop)
        self.worker = Acting(
            OutboxRows(outbox),
            cluster or Recorder(),
            notifier,
            self.clock,
            metrics,
            leader.identity,
            WorkerSettings(
                poll_s=s.workflow_poll_s,
                fresh_for_s=s.fresh_for_s,
                retention_s=s.outbox_retention_s,
                start_within_s=s.workflow_start_timeout_s,
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
            store=self.store,
            sources_behind=sources_behind,
        )
        self._leader_gauge = metrics.leader.labels(leader.identity)
        leader.subscribe(self._on_leadership)
        self._restore_guard_state()

    def _restore_guard_state(self) -> None:
        # Always: the learned history is kept whether or not anything was let through yet.
        self.driver.restore()
        if self.outbox.guard_state(acting=self.driver.acting) is not None:
            log.info("guard state restored", extra={"open_rows": len(self.outbox.open_rows())})

    # --- intake (the loop's thread; accept_threadsafe from watch threads) -----------------
    def accept(self, inputs: list[Input], source: str) -> None:
        """The loop's own observers (first-token probe): never refused, never stored."""
        self.backlog.put(inputs, source in _WATCHED, reserved=False)
        self.metrics.queue_depth.set(self.backlog.depth)

    def accept_threadsafe(self, inputs: list[Input]) -> None:
        """Watch threads: waits while the backlog is full (the watch stops reading)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            self.backlog.put_threadsafe(loop, inputs, self._stop.is_set)

    async def take(self, inputs: list[Input], kind: str, body: bytes) -> str | None:
        """Webhook inputs: None once they are stored and queued (say 2xx), else why not
        (say 503: the sender retries). `body` is what `decode` makes `inputs` from."""
        if self._stop.is_set():
            return "shutting down"
        n = len(inputs)
        if not self.backlog.reserve(n):
            return f"backlog full: {self.backlog.depth} inputs waiting for the core"
        if self.writer is None:
            self.backlog.put(inputs, watched=False)
        else:
            try:
                await self.writer.store(kind, body, inputs)
            except StoreFailed as exc:
                return f"cannot store inputs: {exc}"
        self.metrics.queue_depth.set(self.backlog.depth)
        return None

    def _landed(self, inputs: list[Input], row_id: int | None) -> None:
        """The inbox writer is done with what `take` gave it: queue it, or free its room."""
        if row_id is None:
            self.backlog.release(len(inputs))
        else:
            self.backlog.put(inputs, watched=False)

    def _restore_inbox(self) -> None:
        """Feed the kept inbox rows first, in order: what an earlier process stored and
        never fed, or fed and knew in memory only."""
        if self.inbox is None:
            return
        rows = self.inbox.kept()
        for row in rows:
            try:
                inputs = decode(row.body)
            except InputError as exc:  # it decoded before it was stored: a changed decoder
                log.error(
                    "stored input no longer decodes", extra={"row": row.id, "error": str(exc)}
                )
                continue
            self.backlog.put(inputs, watched=False, reserved=False)
        if rows:
            log.info("stored inputs fed again", extra={"rows": len(rows)})

    def healthy(self) -> tuple[bool, str]:
        failed = self.supervisor.status()
        if failed is not None:
            return False, failed
        failing = self.store.failing()
        if failing is not None:
            return False, f"state file refuses writes ({failing})"
        idle = self.clock.monotonic() - self.driver.last_tick
        if idle > self.settings.stuck_after_s:
            return False, f"timer has not ticked for {idle:.0f}s"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if self._stop.is_set():
            return False, "shutting down"
        if self._loop is None:
            return False, "starting"
        failing = self.store.failing("inbox")
        if failing is not None:
            return False, f"cannot store inputs ({failing})"
        ready, why = self._sources_ready()
        held = self.driver.held
        if ready and held is not None:
            behind_s = self.clock.monotonic() - held[1]
            if behind_s > self.settings.behind_unready_s:
                ready = False
                why = f"behind for {behind_s:.0f}s ({held[0]}): pod deletions held"
        unclear = self.driver.kill_switch_unclear
        if unclear is not None:  # still ready (webhooks are taken), but said where SREs look
            why += f"; kill switch engaged: its file is unclear ({unclear})"
        return ready, why

    @property
    def failure(self) -> str | None:
        """Why the runtime stopped itself (a task kept failing), or None."""
        return self.supervisor.failure

    def stop(self) -> None:
        self._stop.set()

    # --- the run -----------------------------------------------------------------------
    async def run(self) -> None:
        """Until stop(): intake, timer, kill switch, leadership and the outbox worker."""
        self._loop = asyncio.get_running_loop()
        self.driver.apply_kill_switch()
        self._restore_inbox()
        s = self.settings
        parts: dict[str, Callable[[], Awaitable[None]]] = {
            "consume": lambda: self.driver.consume(self.backlog),
            "timer": lambda: self.driver.timer(s.max_tick_s),
            "kill-switch": lambda: self.driver.poll_kill_switch(s.kill_switch_poll_s),
            "leader": lambda: self.leader.run(self._stop),
            "executor": self._execute,
            "state-file": self._keep_state_file,
        }
        if self.writer is not None:
            parts["inbox"] = self.writer.run
        for name, make in parts.items():
            self.supervise(name, make)
        self._on_leadership(self.leader.is_leader(), None)  # `Always` leads from the start
        self._work.set()  # resume open rows at once
        log.info("runtime started", extra={"leader": self.leader.is_leader()})
        try:
            await self._stop.wait()
        finally:
            self._stop.set()
            await self._stop_tasks()
            await self.worker.close()
            await self.leader.release()  # nothing executes any more: a standby may take over
            log.info("runtime stopped", extra={"open_rows": len(self.outbox.open_rows())})

    def supervise(self, name: str, make: Callable[[], Awaitable[None]]) -> None:
        """Run `make()` under the supervisor until the runtime stops (the watches too)."""
        self._tasks.append(asyncio.create_task(self.supervisor.run(name, make), name=name))

    def failing(self, name: str) -> str | None:
        """Why the task `name` failed, while it waits to be restarted; None when it runs."""
        return self.supervisor.restarting.get(name)

    async def _stop_tasks(self) -> None:
        """Cancel the loops; the inbox writer is told to finish instead: never cancelled
        mid-write, so no webhook is left waiting."""
        loops = [t for t in self._tasks if t.get_name() != "inbox"]
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        if self.writer is not None:
            self.writer.close()
            await asyncio.gather(*(t for t in self._tasks if t not in loops))

    def _on_leadership(self, leading: bool, previous: str | None) -> None:
        self._leader_gauge.set(1 if leading else 0)
        self.worker.lead(leading, previous)
        if leading:
            self._work.set()

    def _would_have(self, held: Suppressed) -> None:
        self.worker.note(WouldHave(held.decision, held.reason))

    async def _keep_state_file(self) -> None:
        """Once a second: the state file still there (runtime/statefile.py)."""
        while True:
            await self.clock.sleep(self.settings.store_retry_s)
            try:
                await asyncio.to_thread(self.state_file.check)
            except (sqlite3.Error, OSError) as exc:  # recreating failed: tried again
                self.store.failed("inbox", exc)

    async def _execute(self) -> None:
        while True:
            await wait(self._work, self.settings.executor_poll_s, self.clock)
            self._work.clear()
            leading = self.leader.is_leader()
            self._leader_gauge.set(1 if leading else 0)
            if leading != self.worker.leading:  # a Lease that lapsed without a callback
                self.worker.lead(leading, None)
            await self.worker.step()
