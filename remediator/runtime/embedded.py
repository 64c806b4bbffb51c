"""The embedded runtime: one process, one asyncio loop, one Session.

    sources ──▶ queue ──▶ session.feed ─┐
    timer (next deadline, ≤ max tick) ──┴▶ decisions ──▶ outbox (SQLite) ──▶ Argo ──▶ Slack
    kill-switch file (polled) ──▶ session.set_kill_switch

The session is only ever touched from the loop's thread, so it needs no lock. A
decision is written to the outbox, with the guard state that let it through, before
anything acts on it; the executor (leader only) takes open rows from there.

Every replica writes every decision let through to its own outbox (state is per
replica); only the leader executes rows. A replica that becomes leader executes its
pending rows written within `fresh_for_s` and marks older ones `expired`. Rows it
inherited this way say so in Slack ("taken over from <old holder>"): the old leader
may already have acted, which Argo answers with 409 (done), but a notify-only row
leaves no trace in Argo to check, so it is posted again rather than maybe lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from remediator.executors.argo import (
    ArgoError,
    ArgoExecutor,
    ArgoUnavailable,
    Ended,
    Submitted,
    TrackTimeout,
)
from remediator.executors.argo_params import template_for
from remediator.executors.slack import SlackError, SlackNotifier
from remediator.executors.validate import InvalidParameter
from remediator.inputs.records import Input
from remediator.logfields import get_logger
from remediator.output import decision_json, suppressed_json
from remediator.policy.decision import Decision, Suppressed
from remediator.policy.outcome import Ignored
from remediator.runtime.leader import Leadership
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.notify import Notes
from remediator.runtime.outbox import Outbox, Row
from remediator.session import Session
from remediator.timeline.tracker import StateChange

log = get_logger("remediator.runtime")

_ON = frozenset({"on", "true", "1", "yes", "engaged"})
_OFF = frozenset({"off", "false", "0", "no", ""})


@dataclass(frozen=True, slots=True)
class RuntimeSettings:
    max_tick_s: float = 1.0  # the timer wakes at least this often
    kill_switch_file: str | None = None
    kill_switch_poll_s: float = 5.0
    executor_poll_s: float = 2.0  # open outbox rows are re-examined at least this often
    track_timeout_s: float = 3600.0
    stuck_after_s: float = 30.0  # /healthz fails when the timer has not ticked for this long
    fresh_for_s: float = 600.0  # a new leader executes pending rows younger than this


@dataclass
class Batch:
    """What one step of the session produced; handled after the step, off the hot path."""

    acts: list[Decision] = field(default_factory=list)
    held: list[Suppressed] = field(default_factory=list)

    def transition(self, change: StateChange) -> None:
        t = change.timeline
        log.debug(
            "transition",
            extra={"pod": f"{t.namespace}/{t.name}", "from": change.before, "to": change.after},
        )

    def decision(self, decision: Decision) -> None:
        self.acts.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        self.held.append(suppressed)

    def ignored(self, ignored: Ignored) -> None:
        log.info(
            "ignored",
            extra={"rule": ignored.rule, "subject": ignored.subject, "reason": ignored.reason},
        )


class Runtime:
    def __init__(
        self,
        session: Session,
        outbox: Outbox,
        leader: Leadership,
        metrics: RuntimeMetrics,
        *,
        argo: ArgoExecutor | None = None,
        slack: SlackNotifier | None = None,
        notes: Notes | None = None,
        settings: RuntimeSettings | None = None,
        sources_ready: Callable[[], tuple[bool, str]] = lambda: (True, "no watches"),
    ) -> None:
        self.session = session
        self.outbox = outbox
        self.leader = leader
        self.metrics = metrics
        self.argo = argo
        self.slack = slack
        self.notes = notes
        self.settings = settings or RuntimeSettings()
        self._sources_ready = sources_ready
        self._queue: asyncio.Queue[tuple[list[Input], str]] = asyncio.Queue()
        self._rearm = asyncio.Event()
        self._work = asyncio.Event()
        self._stop = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._last_tick = time.monotonic()
        self._carrying: dict[int, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._kill_switch: bool | None = None
        self._gained: tuple[float, str | None] | None = None  # (when, from whom) we lead
        self._fresh_lead = False  # expire stale rows before executing any
        self._leader_gauge = metrics.leader.labels(leader.identity)
        leader.subscribe(self._on_leadership)
        self._restore_guard_state()

    def _restore_guard_state(self) -> None:
        state = self.outbox.guard_state()
        if state is not None:
            self.session.guard_state = state
            log.info("guard state restored", extra={"open_rows": len(self.outbox.open_rows())})

    # --- intake (the loop's thread; accept_threadsafe from watch threads) -----------------
    def accept(self, inputs: list[Input], source: str) -> None:
        self._queue.put_nowait((inputs, source))
        self.metrics.queue_depth.set(self._queue.qsize())

    def accept_threadsafe(self, inputs: list[Input]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.accept, inputs, "kube")

    def healthy(self) -> tuple[bool, str]:
        dead = [t.get_name() for t in self._tasks if t.done() and not self._stop.is_set()]
        if dead:
            return False, f"task(s) ended: {', '.join(dead)}"
        idle = time.monotonic() - self._last_tick
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
        """Until stop(): intake, timer, kill switch, leadership and executor tasks."""
        self._loop = asyncio.get_running_loop()
        self._apply_kill_switch()
        parts = {
            "consume": self._consume(),
            "timer": self._timer(),
            "kill-switch": self._poll_kill_switch(),
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
            for task in [*self._tasks, *self._carrying.values()]:
                task.cancel()
            await asyncio.gather(*self._tasks, *self._carrying.values(), return_exceptions=True)
            await self.leader.release()  # nothing executes any more: a standby may take over
            log.info("runtime stopped", extra={"open_rows": len(self.outbox.open_rows())})

    def _on_leadership(self, leading: bool, previous: str | None) -> None:
        self._leader_gauge.set(1 if leading else 0)
        if leading:
            self._gained = (time.time(), previous)
            self._fresh_lead = True
            self._work.set()
            return
        self._gained = None
        for task in self._carrying.values():  # a lost leader stops at once
            task.cancel()
        if self._carrying:
            log.warning("not leader: executions stopped", extra={"rows": len(self._carrying)})

    async def _consume(self) -> None:
        while True:
            inputs, source = await self._queue.get()
            self.metrics.queue_depth.set(self._queue.qsize())
            batch = Batch()
            self.session.advance(time.time(), batch)  # an alert is judged at arrival time
            for item in inputs:
                self.session.feed(item, batch)
            self._settle(batch)
            self._rearm.set()  # a new pod may have armed an earlier timer

    async def _timer(self) -> None:
        while True:
            due = self.session.engine.next_deadline()
            wait = self.settings.max_tick_s
            if due is not None:
                wait = min(wait, max(due - time.time(), 0.0))
            self._rearm.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rearm.wait(), wait)
            batch = Batch()
            self.session.advance(time.time(), batch)
            self._settle(batch)
            self._last_tick = time.monotonic()

    def _settle(self, batch: Batch) -> None:
        """Write decisions (and the guard state) to the outbox; say what was held and why."""
        leader = self.leader.is_leader()
        for d in batch.acts:
            log.info("decision", extra={**decision_json(d), "leader": leader})
        for s in batch.held:
            log.info("suppressed", extra=suppressed_json(s))
            if s.guardrail == "dry_run" and leader and self.notes is not None:
                self._spawn(self.notes.would_have(s.decision, s.reason), s.decision.incident)
        if not batch.acts:
            return
        self.outbox.record(batch.acts, self.session.guard_state)  # a standby's too: takeover
        if leader:
            self._work.set()

    def _spawn(self, coro: object, incident: str) -> None:
        async def guarded() -> None:
            try:
                await coro  # type: ignore[misc]
            except SlackError as exc:
                self.metrics.slack_errors.inc()
                log.error("slack note failed", extra={"incident": incident, "error": str(exc)})

        asyncio.get_running_loop().create_task(guarded())

    # --- kill switch ---------------------------------------------------------------------
    async def _poll_kill_switch(self) -> None:
        while True:
            await asyncio.sleep(self.settings.kill_switch_poll_s)
            self._apply_kill_switch()

    def _apply_kill_switch(self) -> None:
        path = self.settings.kill_switch_file
        if not path:
            return
        try:
            text = Path(path).read_text(encoding="utf-8").strip().lower()
        except FileNotFoundError:
            text = ""  # a missing key in the ConfigMap: off
        except OSError as exc:
            log.error("kill switch file unreadable", extra={"path": path, "error": str(exc)})
            return
        engaged = text not in _OFF  # anything but a clear "off" stops actions
        if text not in _ON | _OFF:
            log.error("kill switch file says neither on nor off: engaged", extra={"path": path})
        if engaged != self._kill_switch:
            first = self._kill_switch is None
            self._kill_switch = engaged
            self.session.set_kill_switch(engaged, note=f"{path} says {text or 'nothing'}")
            self.metrics.kill_switch.set(1 if engaged else 0)
            level = logging.INFO if first and not engaged else logging.WARNING
            log.log(level, "kill switch " + ("engaged" if engaged else "off"), extra={"path": path})

    # --- executor (leader only) ------------------------------------------------------------
    async def _execute(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._work.wait(), self.settings.executor_poll_s)
            self._work.clear()
            leading = self.leader.is_leader()
            self._leader_gauge.set(1 if leading else 0)
            if not leading or self._fresh_lead:
                self._fresh_lead = False
                await self._expire_stale()  # a standby keeps only what a takeover may run
            if not leading:
                continue
            for row in await asyncio.to_thread(self.outbox.open_rows):
                if row.id not in self._carrying:
                    task = asyncio.create_task(self._carry(row), name=f"row-{row.id}")
                    self._carrying[row.id] = task
                    task.add_done_callback(self._forget)

    async def _expire_stale(self) -> None:
        fresh_for = self.settings.fresh_for_s
        why = f"not executed: pending longer than {fresh_for:g}s before this replica led"
        for row in await asyncio.to_thread(self.outbox.expire, time.time() - fresh_for, why):
            log.warning(
                "outbox row expired, never executed late",
                extra={"incident": row.incident, "action": row.decision.action, "row": row.id},
            )

    def _for_slack(self, row: Row) -> Decision:
        """A row written before this replica took the lead over from another says so."""
        if self._gained is None:
            return row.decision
        since, previous = self._gained
        if previous is None or previous == self.leader.identity or row.created_at >= since:
            return row.decision
        return replace(row.decision, reason=f"{row.decision.reason} (taken over from {previous})")

    def _forget(self, task: asyncio.Task[None]) -> None:
        for rid, t in list(self._carrying.items()):
            if t is task:
                del self._carrying[rid]

    async def _carry(self, row: Row) -> None:
        d, fields = row.decision, {"incident": row.incident, "action": row.decision.action}
        if not self.leader.is_leader():
            return
        try:
            if d.action == "notify":
                await self._notify_only(row)
                return
            if self.argo is None:
                raise ArgoError("no Argo server configured (--argo-server)")
            if row.state == "pending":
                submitted = await self._submit(row)
                if submitted is None:
                    return
                row = await self._told(row, submitted)
            await self._track(row)
        except ArgoUnavailable as exc:
            self.metrics.executions.labels(d.action, "unavailable").inc()
            log.warning("argo unavailable, will retry", extra={**fields, "error": str(exc)})
            await asyncio.to_thread(self.outbox.mark, row.id, row.state, attempts=row.attempts + 1)
        except TrackTimeout as exc:
            log.warning("workflow not ended yet", extra={**fields, "error": str(exc)})
        except (ArgoError, InvalidParameter) as exc:
            await self._failed(row, str(exc))

    async def _submit(self, row: Row) -> Submitted | None:
        assert self.argo is not None
        submitted = await self.argo.submit(row.decision)
        result = "submitted" if submitted.created else "duplicate"
        self.metrics.executions.labels(row.decision.action, result).inc()
        await asyncio.to_thread(self.outbox.mark, row.id, "submitted", workflow=submitted.name)
        log.info(
            "outbox row submitted",
            extra={"incident": row.incident, "workflow": submitted.name, "result": result},
        )
        return submitted

    async def _told(self, row: Row, submitted: Submitted) -> Row:
        ts = await self._slack_acted(self._for_slack(row), submitted)
        if ts is not None:
            await asyncio.to_thread(self.outbox.mark, row.id, "submitted", slack_ts=ts)
        return self.outbox.get(row.id) or row

    async def _track(self, row: Row) -> None:
        assert self.argo is not None
        name = row.workflow
        if name is None:
            raise ArgoError(f"outbox row {row.id} submitted without a workflow name")
        if row.slack_ts is None:  # a restart between submit and the Slack message
            await self._told(row, self._resubmitted(row.decision, name))
        ended = await self.argo.track(name, timeout_s=self.settings.track_timeout_s)
        await asyncio.to_thread(self.outbox.mark, row.id, "ended", phase=ended.phase)
        self.metrics.workflows_ended.labels(row.decision.action, ended.phase).inc()
        log.info(
            "workflow ended",
            extra={"incident": row.incident, "workflow": name, "phase": ended.phase},
        )
        try:
            await self._slack_ended(row, ended)
        except SlackError as exc:
            self.metrics.slack_errors.inc()
            log.error("slack failed", extra={"incident": row.incident, "error": str(exc)})

    async def _slack_ended(self, row: Row, ended: Ended) -> None:
        """In the act message's thread: the notifier's (this process) or the stored one
        (the act message was posted before a restart)."""
        if self.slack is None:
            return
        stored = row.slack_ts
        if stored and self.notes is not None and self.slack.thread_of(row.incident) != stored:
            await self.notes.ended_in(stored, row.decision, ended)
        else:
            await self.slack.ended(row.incident, ended)

    def _resubmitted(self, d: Decision, name: str) -> Submitted:
        assert self.argo is not None
        return Submitted(
            name=name,
            namespace="",
            template=template_for(d),
            incident=d.incident,
            created=False,
            url=self.argo.url_for(name),
        )

    async def _notify_only(self, row: Row) -> None:
        ts = await self._slack_acted(self._for_slack(row), None)
        await asyncio.to_thread(self.outbox.mark, row.id, "ended", phase="notified", slack_ts=ts)
        self.metrics.executions.labels("notify", "notified").inc()

    async def _slack_acted(self, d: Decision, submitted: Submitted | None) -> str | None:
        if self.slack is None:
            return None
        try:
            return await self.slack.acted(d, submitted)
        except SlackError as exc:
            self.metrics.slack_errors.inc()
            log.error("slack failed", extra={"incident": d.incident, "error": str(exc)})
            return None

    async def _failed(self, row: Row, error: str) -> None:
        d = row.decision
        self.metrics.executions.labels(d.action, "failed").inc()
        log.error("outbox row failed", extra={"incident": d.incident, "error": error})
        await asyncio.to_thread(self.outbox.mark, row.id, "failed", error=error[:2000])
        if self.notes is not None:
            try:
                await self.notes.could_not(d, error)
            except SlackError as exc:
                self.metrics.slack_errors.inc()
                log.error("slack note failed", extra={"incident": d.incident, "error": str(exc)})
