"""The acting component: open rows → executors → outcomes, the same in both runtimes.

`serve` runs it on the leader over the SQLite outbox (`runtime.outbox.OutboxRows`); each
`remediator worker` runs it over the rows of the commands partitions it holds, kept in a
Faust table (`streams.rows.TableRows`). It asks its store only what `runtime.rows.RowStore`
says, so both runtimes act, retry, tell and follow a workflow the same way, and durably.

    pending ──Submit──▶ submitted ──Poll…──▶ ended      Tell(Acted) after Submit,
       │                    │                           Tell(Finished) into its thread
       │                    │ still Pending after start_within_s: Tell(NotStarted), polled on
       ├──Refused───────────┴──────────────▶ failed     Tell(CouldNot)
       ├──(a delete, looked at again: no longer stuck)─▶ ended (spared)  Tell(Spared)
       └──(a note only: Tell(Acted))───────▶ ended (notified)

It knows an action only through the action table (does it act on the cluster, or is
it a note?) and executors only through `carry(command) -> outcome`; every failure of
every executor is handled here, in `_carry` and `_told`. Each row moves in its own
task, so a slow call holds up only its row. Time is the injected clock's: polls and
retries are scheduled on its monotonic clock, rows are stamped in its wall time.

Slack, at most once per message and never lost: a row's act message and its end
message (the thread reply, or "could not act") each have an intent column, written
before the post, and a ts column, written after (`_post`). A ts stored: never posted
again. An intent without a ts: the post may have gone through (killed mid-post, or
the answer lost), and Slack's chat.postMessage has no idempotency key, so the
notifier is asked to look in the channel for it (`Tell.unsure_since`) before posting
again. A row inherited from another leader (each replica has its own outbox) is looked
for the same way: the old leader may have posted it. Only the leader posts: `is_leader`
is asked before every post, since a Lease can lapse between two passes (on Kafka: the
worker holding the row's partition, not in the middle of a rebalance). An end waits
for its act message while that cannot get through, so it always goes into the act's
thread; only an act Slack refused for good leaves the end alone, and the notifier then
writes the act's context into it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from prometheus_client import Counter

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.executors.protocol import (
    Acted,
    Command,
    CouldNot,
    Ended,
    Executor,
    Finished,
    Note,
    NotStarted,
    Outcome,
    Poll,
    Posted,
    Refused,
    Running,
    Spared,
    Submit,
    Submitted,
    Tell,
    Unavailable,
)
from remediator.logfields import get_logger
from remediator.runtime.clock import Clock
from remediator.runtime.rows import SUBMITTING, Row, RowStore, State

log = get_logger("remediator.runtime")

Message = Literal["act", "stuck", "end"]
Look = Callable[[Decision], Awaitable[str | None]]
_COLUMNS: dict[Message, tuple[str, str]] = {
    "act": ("act_at", "slack_ts"),
    "stuck": ("stuck_at", "stuck_ts"),
    "end": ("end_at", "end_ts"),
}


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    poll_s: float = 5.0  # a running workflow is looked at no more often than this
    retry_s: float = 2.0  # first wait after an executor was unavailable; doubles per attempt
    max_retry_s: float = 300.0
    fresh_for_s: float = 600.0  # a new leader executes pending rows younger than this
    retention_s: float = 7 * 86400.0  # closed rows are deleted this long after closing
    prune_every_s: float = 3600.0
    # A workflow Argo took that has not started (still Pending: no controller, a quota) in
    # this long is told to on-call, once; it is followed to its end all the same.
    start_within_s: float = 300.0


class ActingMetrics(Protocol):
    """The counters it keeps (`runtime.metrics`: `ActingCounters.on`, or `RuntimeMetrics`)."""

    @property
    def executions(self) -> Counter: ...
    @property
    def workflows_ended(self) -> Counter: ...
    @property
    def slack_errors(self) -> Counter: ...
    @property
    def outbox_pruned(self) -> Counter: ...


class Acting:
    def __init__(
        self,
        store: RowStore,
        cluster: Executor,
        notifier: Executor | None,
        clock: Clock,
        metrics: ActingMetrics,
        identity: str,
        settings: WorkerSettings | None = None,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.notifier = notifier
        self.clock = clock
        self.metrics = metrics
        self.identity = identity
        self.settings = settings or WorkerSettings()
        self.leading = False
        self._is_leader = is_leader  # asked again before every post
        self._next_prune: float | None = None  # monotonic; None: prune on the first pass
        self._fresh_lead = False
        self._gained: tuple[float, str | None] | None = None  # (when, from whom) we lead
        self._carrying: dict[int, asyncio.Task[None]] = {}
        # In-memory schedules on the monotonic clock, so a step of the wall clock (NTP, a VM
        # resumed) neither stops the polls for an hour nor fires them all at once. They need
        # not survive a restart: a new process looks at every open row at once.
        self._next_poll: dict[int, float] = {}
        self._next_try: dict[int, float] = {}  # backoff after Unavailable
        self._submitted: dict[int, float] = {}  # monotonic time each workflow was submitted
        self._stuck_logged: set[int] = set()  # rows whose "not started" was logged and counted
        self._notes: set[asyncio.Task[str | None]] = set()
        # Looks at a pod again before it is deleted: why it is spared, or None (still stuck).
        self.look: Look | None = None

    # --- leadership ------------------------------------------------------------------------
    def lead(self, leading: bool, previous: str | None) -> None:
        self.leading = leading
        if leading:
            self._gained = (self.clock.now(), previous)
            self._fresh_lead = True
            return
        self._gained = None
        for task in self._carrying.values():  # a lost leader stops at once
            task.cancel()
        if self._carrying:
            log.warning("not leader: executions stopped", extra={"rows": len(self._carrying)})

    # --- one pass: what the loop calls, and what tests call on a virtual clock -----------
    async def step(self) -> None:
        """Expire what a standby must not run late; start a task for each open row."""
        await self._prune()
        if not self.leading or self._fresh_lead:
            self._fresh_lead = False
            await self._expire_stale()
        if not self.leading:
            return
        for row in await self.store.open_rows():
            self._start(row)

    async def act_now(self, row: Row) -> None:
        """A row just written (a command taken on Kafka): its first move at once, awaited,
        rather than at the next pass."""
        task = self._start(row) if self.leading else None
        if task is not None:
            await asyncio.wait([task])

    def _start(self, row: Row) -> asyncio.Task[None] | None:
        if row.id in self._carrying or not self._due(self._next_try, row.id):
            return None
        self._next_try.pop(row.id, None)
        task = asyncio.create_task(self._advance(row), name=f"row-{row.id}")
        self._carrying[row.id] = task
        task.add_done_callback(self._forget)
        return task

    def _due(self, schedule: dict[int, float], row_id: int) -> bool:
        return self.clock.monotonic() >= schedule.get(row_id, float("-inf"))

    def _forget(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            # the row stays open: the next pass starts it again
            log.error("outbox row task failed", extra={"task": task.get_name()}, exc_info=exc)
        for rid, t in list(self._carrying.items()):
            if t is task:
                del self._carrying[rid]

    async def idle(self) -> None:
        """Wait until every row task and note started so far is done."""
        while self._carrying or self._notes:
            await asyncio.gather(*self._carrying.values(), *self._notes, return_exceptions=True)

    async def close(self) -> None:
        for task in [*self._carrying.values(), *self._notes]:
            task.cancel()
        await asyncio.gather(*self._carrying.values(), *self._notes, return_exceptions=True)

    def note(self, note: Note) -> None:
        """Tell on-call something that is not an outbox row (a dry run's "would have")."""
        task = asyncio.get_running_loop().create_task(self._tell(note))
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    async def _prune(self) -> None:
        """Closed rows older than the retention period go, on every replica (in a thread)."""
        if self._next_prune is not None and self.clock.monotonic() < self._next_prune:
            return
        self._next_prune = self.clock.monotonic() + self.settings.prune_every_s
        before = self.clock.now() - self.settings.retention_s  # rows are stamped in wall time
        pruned = await self.store.prune(before)
        if pruned:
            self.metrics.outbox_pruned.inc(pruned)
            log.info("outbox rows pruned", extra={"rows": pruned, "closed_before": before})

    async def _expire_stale(self) -> None:
        fresh_for = self.settings.fresh_for_s
        why = f"not executed: pending longer than {fresh_for:g}s before this replica led"
        stale = await self.store.expire(self.clock.now() - fresh_for, why)
        for row in stale:
            log.warning(
                "outbox row expired, never executed late",
                extra={"incident": row.incident, "action": row.decision.action, "row": row.id},
            )

    # --- one row ---------------------------------------------------------------------------
    async def _advance(self, row: Row) -> None:
        if not self.leading:
            return
        if row.state == "failed":  # failed, its "could not act" not yet told
            told = await self._post(row, "end", CouldNot(row.decision, row.error or "failed"))
            if told is None:  # Slack is no longer configured: nothing to wait for
                await self._mark(row, None, end_at=None)
        elif not action(row.decision.action).acts:
            out = await self._post(row, "act", Acted(self._for_people(row)))
            if isinstance(out, Unavailable):  # told later, not lost
                self._back_off(row, out.reason)
                await self._mark(row, None, attempts=row.attempts + 1)
                return
            await self._mark(row, "ended", phase="notified")
            self.metrics.executions.labels(row.decision.action, "notified").inc()
        elif row.state == "pending":
            await self._submit(row)
        elif self._due(self._next_poll, row.id):
            await self._poll(row)

    async def _submit(self, row: Row) -> None:
        d = row.decision
        if not await self._still_stuck(row):
            return
        if row.phase != SUBMITTING:
            # On record before the call: were this process killed between the submit and
            # its answer, the workflow may exist and may delete the pod, so the row must
            # not be dropped once the pod is gone: the next leader submits again, and Argo's
            # 409 hands it the workflow to follow to its end.
            await self._mark(row, None, phase=SUBMITTING)
        out = await self._carry(row, Submit(d))
        if not isinstance(out, Submitted):
            return
        result = "submitted" if out.created else "duplicate"
        self.metrics.executions.labels(d.action, result).inc()
        self._submitted[row.id] = self.clock.monotonic()
        await self._mark(
            row, "submitted", workflow=out.name, phase=None, submitted_at=self.clock.now()
        )
        log.info(
            "outbox row submitted",
            extra={"incident": row.incident, "workflow": out.name, "result": result},
        )
        row = replace(row, state="submitted", workflow=out.name)
        await self._post(row, "act", Acted(self._for_people(row), out))
        self._next_poll[row.id] = self.clock.monotonic()  # look at once, then every poll_s

    async def _still_stuck(self, row: Row) -> bool:
        """Look again just before a destructive action (`look`: a quorum read of the pod,
        judged by the core): a pod no longer stuck is spared, told and counted, and its row
        ends; one that could not be read waits (a watch gap is an API server gap too)."""
        d = row.decision
        if self.look is None or d.action != "delete-pod":
            return True
        try:
            spared = await self.look(d)
        except Exception as exc:  # noqa: BLE001 — any failure to look means: not now
            self._back_off(row, f"could not look at the pod again: {exc}")
            await self._mark(row, None, attempts=row.attempts + 1)
            return False
        if spared is None:
            return True
        told = await self._post(row, "act", Spared(d, spared))
        if isinstance(told, Unavailable):  # told later, not lost: the row stays pending
            self._back_off(row, told.reason)
            return False
        await self._mark(row, "ended", phase="spared")
        self.metrics.executions.labels(d.action, "spared").inc()
        log.warning(
            "spared: looked at again, the pod is no longer stuck",
            extra={"incident": row.incident, "action": d.action, "reason": spared},
        )
        return False

    async def _poll(self, row: Row) -> None:
        d, name = row.decision, row.workflow
        if name is None:
            await self._failed(row, f"outbox row {row.id} submitted without a workflow name")
            return
        out = await self._carry(row, Poll(d, name))
        if not isinstance(out, Running | Ended):
            return
        thread, act_waits = row.slack_ts, False
        if thread is None:  # a restart, or Slack down, between submit and the act message
            again = Submitted(name, "", "", row.incident, created=False, url=out.url)
            acted = await self._post(row, "act", Acted(self._for_people(row), again))
            thread = acted.ts if isinstance(acted, Posted) else None
            # What follows waits for the act message, to go into its thread; only an act
            # message Slack refused for good leaves them to say it all alone.
            act_waits = isinstance(acted, Unavailable)
        if isinstance(out, Running) or act_waits:
            self._next_poll[row.id] = self.clock.monotonic() + self.settings.poll_s
            if isinstance(out, Running) and out.phase == "Pending" and not act_waits:
                await self._not_started(row, out, thread)
            return
        # Tell first, mark after: a reply that could not be posted (Slack unreachable) keeps
        # the row open, so the next pass polls and tells again instead of losing the reply.
        told = await self._post(row, "end", Finished(d, out), thread)
        if isinstance(told, Unavailable):
            self._next_poll[row.id] = self.clock.monotonic() + self.settings.poll_s
            return
        self._next_poll.pop(row.id, None)
        self._submitted.pop(row.id, None)
        self._stuck_logged.discard(row.id)
        await self._mark(row, "ended", phase=out.phase)
        self.metrics.workflows_ended.labels(d.action, out.phase).inc()
        log.info(
            "workflow ended",
            extra={"incident": row.incident, "workflow": name, "phase": out.phase},
        )

    async def _not_started(self, row: Row, seen: Running, thread: str | None) -> None:
        """Tell on-call, once, about a workflow still Pending `start_within_s` after it was
        submitted: accepted by Argo and never started, it would otherwise wait unseen."""
        if row.stuck_ts is not None:
            return
        waited = self._pending_for(row)
        if waited < self.settings.start_within_s:
            return
        first = row.stuck_at is None and row.id not in self._stuck_logged
        if first:
            self._stuck_logged.add(row.id)
            self.metrics.executions.labels(row.decision.action, "not_started").inc()
            log.warning(
                "workflow not started",
                extra={
                    "incident": row.incident,
                    "workflow": seen.workflow,
                    "phase": seen.phase,
                    "waited_s": round(waited, 1),
                },
            )
        note = NotStarted(self._for_people(row), seen.workflow, seen.phase, waited, seen.url)
        await self._post(row, "stuck", note, thread)

    def _pending_for(self, row: Row) -> float:
        """Seconds since the workflow was submitted, on the monotonic clock. A row this
        process did not submit (a restart, a takeover) is credited the wall time since its
        stored `submitted_at`, so restarting never postpones the note for good."""
        start = self._submitted.get(row.id)
        if start is None:
            before = self.clock.now() - (row.submitted_at or self.clock.now())
            start = self._submitted[row.id] = self.clock.monotonic() - max(before, 0.0)
        return self.clock.monotonic() - start

    async def _carry(self, row: Row, command: Command) -> Outcome:
        """The cluster executor's failures, in one place: Unavailable waits for the next
        pass, Refused fails the row and tells on-call."""
        d = row.decision
        out = await self.cluster.carry(command)
        if isinstance(out, Unavailable):
            result = "unauthorized" if out.unauthorized else "unavailable"
            self.metrics.executions.labels(d.action, result).inc()
            self._back_off(row, out.reason)
            await self._mark(row, None, attempts=row.attempts + 1)
            if out.unauthorized and row.attempts == 0:  # tell on-call once, not every retry
                await self._tell(CouldNot(d, f"{out.reason}; retrying with backoff"))
        elif isinstance(out, Refused):
            await self._failed(row, out.reason)
        return out

    def _back_off(self, row: Row, reason: str) -> None:
        s = self.settings
        wait = min(s.retry_s * 2 ** min(row.attempts, 30), s.max_retry_s)
        self._next_try[row.id] = self.clock.monotonic() + wait
        log.warning(
            "executor unavailable, will retry",
            extra={
                "incident": row.incident,
                "action": row.decision.action,
                "error": reason,
                "retry_in_s": wait,
            },
        )

    async def _failed(self, row: Row, error: str) -> None:
        """Failed, and the end message's intent in the same write: a crash before it is
        told leaves the row open until it is."""
        d = row.decision
        self.metrics.executions.labels(d.action, "failed").inc()
        log.error("outbox row failed", extra={"incident": d.incident, "error": error})
        error = error[:2000]
        if self.notifier is None or not self._may_post():
            await self._mark(row, "failed", error=error)
            return
        now = self.clock.now()
        await self._mark(row, "failed", error=error, end_at=now)
        await self._post(
            replace(row, state="failed", error=error), "end", CouldNot(d, error), begun=True
        )

    async def _post(
        self, row: Row, message: Message, note: Note, thread: str | None = None, begun: bool = False
    ) -> Outcome | None:
        """A row's act or end message, posted at most once: the intent stored before the
        post (unless the caller just did: `begun`), the ts after it. An intent left by an
        earlier attempt makes the notifier look before posting again."""
        at_column, ts_column = _COLUMNS[message]
        ts: str | None = getattr(row, ts_column)
        if ts is not None:
            return Posted(ts)
        if self.notifier is None:
            return None
        if not self._may_post():
            return Unavailable("not the leader")
        thread = await self._thread(row, thread)
        since: float | None = None
        if not begun:
            since = getattr(row, at_column)
            if since is None:
                await self._mark(row, None, **{at_column: self.clock.now()})
                # The leader before us may have posted it from its own outbox: look first.
                since = row.created_at if self._taken_over(row) else None
        out = await self._told(note, thread, unsure_since=since)
        if isinstance(out, Posted):
            await self._mark(row, None, **{ts_column: out.ts})
        elif isinstance(out, Refused):  # Slack said no: nothing went out, nothing to look for
            await self._mark(row, None, **{at_column: None})
        return out

    async def _thread(self, row: Row, own: str | None) -> str | None:
        """Where the row's message goes: the thread of the incident it is told under, where
        that incident's act message is in this store (every message of the row: Slack wants
        a thread's first message, never a reply, as `thread_ts`); else the row's own thread
        (`own`: its act message, None for the act message itself: the channel)."""
        under = row.decision.told_under
        if under is None:
            return own
        found = await self.store.act_message(under)
        return found if found is not None else own

    def _may_post(self) -> bool:
        return self.leading and self._is_leader()

    async def _tell(self, note: Note, thread: str | None = None) -> str | None:
        out = await self._told(note, thread)
        return out.ts if isinstance(out, Posted) else None

    async def _told(
        self, note: Note, thread: str | None = None, unsure_since: float | None = None
    ) -> Outcome | None:
        """The notifier's failures, in one place: counted, logged, never raised. Only the
        leader posts."""
        if self.notifier is None:
            return None
        if not self._may_post():
            log.info("not leader: not told", extra={"incident": note.decision.incident})
            return Unavailable("not the leader")
        out = await self.notifier.carry(Tell(note, thread, unsure_since))
        if isinstance(out, Posted):
            return out
        if isinstance(out, Unavailable | Refused):
            cause = out.cause or ("refused" if isinstance(out, Refused) else "unavailable")
            reason = out.reason
        else:
            cause, reason = "bad_answer", repr(out)
        self.metrics.slack_errors.labels(reason=cause).inc()
        log.error(
            "slack failed",
            extra={
                "incident": note.decision.incident,
                "action": note.decision.action,
                "note": type(note).__name__.lower(),
                "cause": cause,
                "error": reason,
                "retried": isinstance(out, Unavailable),  # told on a later pass, not lost
            },
        )
        return out

    async def _mark(self, row: Row, state: State | None, **fields: str | float | None) -> None:
        await self.store.mark(row, state, **fields)

    def _taken_over(self, row: Row) -> str | None:
        """The replica this one took the lead over from, for a row written before then."""
        if self._gained is None:
            return None
        since, previous = self._gained
        if previous is None or previous == self.identity or row.created_at >= since:
            return None
        return previous

    def _for_people(self, row: Row) -> Decision:
        """A row written before this replica took the lead over from another says so."""
        previous = self._taken_over(row)
        if previous is None:
            return row.decision
        return replace(row.decision, reason=f"{row.decision.reason} (taken over from {previous})")
