"""The driver: inputs and timers into the session, decisions into the outbox.

    queue of inputs ──▶ session.feed ─┐
    timer (next deadline, ≤ max tick) ┴▶ decisions ──▶ outbox.record (with guard state)
    kill-switch file (polled) ──▶ session.set_kill_switch
    what the core learned ──▶ outbox.learn (restored on start: `restore`)

It knows nothing of what an action is or who carries it out: it writes what the core let
through, logs what it held, and hands a dry run's "would have" to `simulated`. The
session's time is `ClusterTime` over the injected clock (the cluster's clock as the
inputs show it, carried on by the monotonic clock), so tests step it by hand (`feed`,
`tick`) and a step of the local wall clock neither fires nor holds back a timer.

A write the state file refuses (disk full, read-only) loses nothing: the decisions wait in
memory and are written, with the guard state then current, at the next feed or tick (at
least once a second); `StoreHealth` says meanwhile that the store fails.

Behind: while the picture may lag the cluster's (serve was paused; a Pod watch is relisting,
has not reached the API server's resourceVersion or missed its BOOKMARK: `sources_behind`),
the core holds pod deletions (`Session.set_behind`, guard/watch_current.py) and asks again
at its next look; held until the sources are current and everything they queued is fed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from remediator.contract.decision import Decision, Suppressed
from remediator.core.guard import FOREIGN_RECORDS
from remediator.inputs.records import Input, Relisted
from remediator.inputs.stamps import api_server_time
from remediator.logfields import get_logger
from remediator.output import decision_json, suppressed_json
from remediator.policy.outcome import Ignored
from remediator.policy.workloads import READY_CREATED
from remediator.runtime.backlog import Backlog
from remediator.runtime.clock import Clock, ClusterTime, wait
from remediator.runtime.inbox import StoreHealth
from remediator.runtime.kill_switch_file import read_switch
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, Sample
from remediator.runtime.shared_state import decode_through
from remediator.session import Session
from remediator.timeline.tracker import StateChange

log = get_logger("remediator.runtime")
_UNKEPT = 10_000  # learned samples held while the state file refuses writes

# A list a watch makes: (kind, namespace, field selector), as `Relisted` says it is complete.
ListKey = tuple[str, str, str | None]
_NOT_YET_S = 0.001  # while the first lists are awaited, the clock stays this short of a timer


@dataclass
class Batch:
    """What one step of the session produced; handled after the step, off the hot path."""

    acts: list[Decision] = field(default_factory=list)
    dry: list[Decision] = field(default_factory=list)  # a dry run's "would": got through too
    held: list[Suppressed] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # uids of pods that went away

    def transition(self, change: StateChange) -> None:
        t = change.timeline
        if change.after == "deleted":
            self.gone.append(t.uid)
        log.debug(
            "transition",
            extra={"pod": f"{t.namespace}/{t.name}", "from": change.before, "to": change.after},
        )

    def decision(self, decision: Decision) -> None:
        self.acts.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        self.held.append(suppressed)
        if suppressed.simulated:
            self.dry.append(suppressed.decision)

    def ignored(self, ignored: Ignored) -> None:
        log.info(
            "ignored",
            extra={"rule": ignored.rule, "subject": ignored.subject, "reason": ignored.reason},
        )


class Driver:
    def __init__(
        self,
        session: Session,
        outbox: Outbox,
        clock: Clock,
        metrics: RuntimeMetrics,
        *,
        leading: Callable[[], bool],
        wake_worker: Callable[[], None],
        simulated: Callable[[Suppressed], None],
        kill_switch_file: str | None = None,
        forget_after_s: float = 600.0,
        store: StoreHealth | None = None,
        pause_s: float = 5.0,
        catch_up_s: float = 5.0,
        sources_behind: Callable[[], str | None] | None = None,
    ) -> None:
        self.session = session
        self.outbox = outbox
        self.clock = clock
        self.cluster = ClusterTime(clock)  # the session's `now`: see ClusterTime
        self.metrics = metrics
        self._leading = leading
        self._wake_worker = wake_worker
        self._simulated = simulated
        self._kill_switch_file = kill_switch_file
        self._kill_switch: bool | None = None
        self.kill_switch_unclear: str | None = None  # why the file reads as on, not clearly
        self._forget_after_s = forget_after_s
        self.store = store or StoreHealth()
        self._unwritten: list[Decision] = []  # let through, not yet in the outbox
        self._unwritten_dry: list[Decision] = []  # a dry run's, likewise (rows marked dry)
        self._unkept: list[Sample] = []  # learned, not yet in the state file
        self.rearm = asyncio.Event()  # a new input may have armed an earlier timer
        self.last_tick = clock.monotonic()
        # Behind: (why, since when on the monotonic clock) the picture may lag the cluster's.
        self.behind: tuple[str, float] | None = None
        self.pause_s = pause_s
        self.catch_up_s = catch_up_s
        self._backlog: Backlog | None = None
        self._max_tick_s: float | None = None  # set while the timer loop runs
        self._first_lists: set[ListKey] = set()  # awaited before any timer fires
        # Why the sources' picture may lag the cluster's (sources/kube_watch.py), or None.
        self._sources_behind = sources_behind or (lambda: None)
        # Pod deletions held: (why, since when on the monotonic clock); see `_hold`.
        self.held: tuple[str, float] | None = None
        self._told_core: str | None = None
        self._was_current = False
        self._hold(first=True)

    # --- one step each: what the loops call, and what tests call on a virtual clock ------
    def feed(self, inputs: list[Input], watched: bool = True) -> None:
        """`watched`: from the watch; False for a webhook's inputs (see Tracker.apply)."""
        self._step_in()
        batch = Batch()
        if watched:
            # Only the API server's own stamps move the clock (inputs.stamps): a kubelet's
            # clock is its node's, and a webhook's time is whatever its sender says.
            for item in inputs:
                self.cluster.observe(api_server_time(item))
        for item in inputs:
            self.session.feed(item, batch, watched, now=self._session_now())
            if isinstance(item, Relisted) and self._first_lists:
                self._list_in(item)
        self._settle(batch)
        self._report_skew()
        self.rearm.set()

    def _report_skew(self) -> None:
        """A node whose clock is proven off: said once per change (the metric has it too)."""
        news = self.session.tracker.skew_news
        for node, skew in news.items():
            way = "ahead of" if skew > 0 else "behind"
            log.warning(
                "node clock off: its pods' times are corrected onto the API server's",
                extra={"node": node, "skew_s": round(skew, 1), "way": way + " the API server"},
            )
        news.clear()

    def tick(self) -> None:
        self._step_in()
        batch = Batch()
        if self.cluster.known or self.session.engine.next_deadline() is not None:
            # (Before the cluster's time is known nothing of it is tracked: a wrong local
            # clock is not let run the session's clock ahead of the cluster's.)
            self.session.advance(self._session_now(), batch)
        self._settle(batch)
        # Deleted pods leave memory (and /metrics) once their grace has passed.
        self.session.tracker.prune(self.session.now, self._forget_after_s)
        self.last_tick = self.clock.monotonic()

    # --- the first lists: a start sees the whole picture before any timer fires ---------
    def await_first_lists(self, lists: Iterable[ListKey]) -> None:
        """No timer fires until every one of these watches' first lists is in. A start
        that judged the pods before their Events would take a pod pulling its image (a
        pull shows only in Events) for one stuck in container start and delete it, and one
        that judged them before their Deployment would cap deletions at one (replicas
        unknown): a restarted serve would decide otherwise than one that ran on. The clock
        still moves up to the earliest timer; a timer due meanwhile fires once the lists
        are in, stamped with its own due time."""
        self._first_lists = set(lists)
        if self._first_lists:
            log.info(
                "timers wait for the watches' first lists", extra={"lists": len(self._first_lists)}
            )

    def _list_in(self, item: Relisted) -> None:
        self._first_lists.discard((item.kind, item.namespace, item.selector))
        if not self._first_lists:
            log.info("the watches' first lists are in: timers run")

    def _first_lists_now(self, now: float) -> float:
        """`now`, or, while a first list is awaited, just short of the earliest timer."""
        due = self.session.engine.next_deadline()
        if not self._first_lists or due is None or due > now:
            return now
        return max(self.session.now, due - _NOT_YET_S)

    # --- behind: a pause or a gap, and catching up --------------------------------------
    def fell_behind(self, why: str) -> None:
        """The picture may lag the cluster's (serve was paused, a watch was away): the
        session's clock waits until the watch has caught up, so no timer fires on a pod
        whose news (it became Ready) is still on its way. Inputs still apply."""
        if self.behind is None:
            log.warning(
                "behind: the session's clock waits until the watch has caught up",
                extra={"why": why, "catch_up_s": self.catch_up_s},
            )
        self.behind = (why, self.clock.monotonic())

    def _session_now(self) -> float:
        """The time the session may move to: the cluster's, or, after a pause, where it is
        (while a first list is awaited, no further than just short of a timer)."""
        now = self.cluster.now() if self.behind is None else self.session.now
        return self._first_lists_now(now)

    def _step_in(self) -> None:
        """First thing in `feed` and `tick`: a pause found or over, and the hold said."""
        self._check_pause()
        self._pause_over()
        self._hold()

    def _depth(self) -> int:
        return self._backlog.depth if self._backlog is not None else 0

    def _pause_over(self) -> None:
        if self.behind is None:
            return
        why, since = self.behind
        if self.clock.monotonic() - since < self.catch_up_s or self._depth():
            return
        self.behind = None
        log.info("caught up: the session's clock moves on", extra={"was": why})

    def _hold(self, first: bool = False) -> None:
        """Pod deletions are held while the picture may lag: after a pause, until it is over;
        while a source says it is behind; and after that until what the sources queued
        meanwhile (a relist's pods) is fed. Each change is said once (log, gauge); the core
        is told whenever the reason changes."""
        why = self._sources_behind()
        if why is None and self.behind is not None:
            why = self.behind[0]
        if why is None and self.held is not None and self._depth():
            why = self.held[0]  # still on its way: the inputs queued meanwhile
        now = self.clock.monotonic()
        if why is not None and self.held is None:
            # Before the first list at start this is expected: said, but not as a warning.
            level = logging.WARNING if self._was_current else logging.INFO
            log.log(
                level,
                "behind: pod deletions held until the watch has caught up",
                extra={"why": why},
            )
            self.held = (why, now)
        elif why is not None and self.held is not None:
            self.held = (why, self.held[1])
        elif why is None and self.held is not None:
            log.info(
                "caught up: held pod deletions are decided again",
                extra={"was": self.held[0], "behind_s": round(now - self.held[1], 1)},
            )
            self.held = None
        self._was_current = self._was_current or self.held is None
        self.metrics.behind.set(0 if self.held is None else 1)
        if first or why != self._told_core:
            self.session.set_behind(why)
            self._told_core = why

    def _check_pause(self) -> None:
        """The timer ticks at least every `max_tick_s`; a gap much longer than that means the
        process was paused (SIGSTOP, a frozen VM, a starved loop), and whatever the watch
        sent meanwhile is not in yet. Checked first thing in `feed` and `tick`: whichever
        runs first after the pause. (Only while the timer loop runs: tests that call `tick`
        by hand step time as they please.)"""
        if self._max_tick_s is None:
            return
        gap = self.clock.monotonic() - self.last_tick
        if gap > self._max_tick_s + self.pause_s:
            self.last_tick = self.clock.monotonic()
            self.fell_behind(f"paused: no tick for {gap:.0f}s")

    def _settle(self, batch: Batch) -> None:
        """Write decisions (and the guard state) to the outbox; say what was held and why."""
        leader = self._leading()
        for d in batch.acts:
            log.info("decision", extra={**decision_json(d), "leader": leader})
        for s in batch.held:
            log.info("suppressed", extra=suppressed_json(s))
            if s.simulated and leader:
                self._simulated(s)
        # One path for whatever got through, acted or dry: its row and the guard state
        # that let it through, in one transaction (a restarted dry run remembers it).
        self._unwritten.extend(batch.acts)
        self._unwritten_dry.extend(batch.dry)
        acts = bool(self._unwritten)
        if (acts or self._unwritten_dry) and self._write() and acts and leader:
            self._wake_worker()
        for uid in batch.gone:
            self._drop_for_gone_pod(uid)
        self._keep_learned()

    def _keep_learned(self) -> None:
        """What the core learned (finished cold starts' phases and steps), to the state
        file: a restarted serve judges by its siblings at once, not after `min_samples`
        more cold starts of each model. Kept for the next try when the file refuses."""
        self._unkept.extend(self.session.learned())
        if not self._unkept:
            return
        try:
            self.outbox.learn(self._unkept, self.session.policy.rules.stuck_pod.adaptive.window)
        except sqlite3.Error as exc:
            self.store.failed("outbox", exc)
            del self._unkept[:-_UNKEPT]  # the newest matter: a history keeps its last samples
            return
        self.store.ok("outbox")
        self._unkept = []

    def _drop_for_gone_pod(self, uid: str) -> None:
        """A pod that went away (a watch DELETED, a relist without it) takes its pending
        deletion with it: the worker never submits a workflow for a pod already gone."""
        try:
            dropped = self.outbox.drop_for_gone_pod(uid, "not executed: the pod was gone")
        except sqlite3.Error as exc:  # the worker's UID precondition still spares a new pod
            self.store.failed("outbox", exc)
            return
        for row in dropped:
            log.info(
                "pending action dropped: the pod is gone",
                extra={"incident": row.incident, "action": row.decision.action, "row": row.id},
            )

    def _write(self) -> bool:
        """Every decision not yet written, with the guard state; False when the file
        refuses (they stay, for the next try)."""
        try:
            self.outbox.record(  # a standby's too
                self._unwritten, self.session.guard_state, self._unwritten_dry, self.acting
            )
        except sqlite3.Error as exc:
            self.store.failed("outbox", exc)
            return False
        self.store.ok("outbox")
        self._unwritten, self._unwritten_dry = [], []
        return True

    @property
    def acting(self) -> bool:
        """False for a dry run: its "would" never happened (see `restore`)."""
        return not self.session.policy.dry_run

    def restore(self) -> None:
        """Start where the state file left off: the guard state saved with the last rows,
        so nothing let through before a restart is let through again. A dry run restores
        the newest (what acting runs did and what it "would" itself); an acting run the
        newest an acting run saved: a dry run's would-deletions never happened, so the pod
        it announced is acted on now, once, and they spend no blast-radius slot. The rows
        themselves are told to the decider again, on the same terms (its kill-loop memory:
        an acting run's, of what acting runs did)."""
        samples, bad = self.outbox.learned()
        self.session.restore_learned(tuple(samples))
        if samples or bad:
            # (a workload's Ready pods are kept beside the models' cold starts: counted apart)
            ready = {key for key, phase, _ in samples if phase == READY_CREATED}
            models = {key for key, phase, _ in samples if phase != READY_CREATED}
            counts = {"samples": len(samples), "models": len(models), "workloads": len(ready)}
            log.info("learned history restored", extra=counts)
        for what in bad:
            log.warning("learned history unreadable: left out", extra={"error": what})
        state = self.outbox.guard_state(acting=self.acting)
        if state is not None:
            self.session.restore_guard_state(state)
            self.session.set_behind(self._told_core)  # now's, never the stored one
            if foreign := self.session.guard_state.foreign:
                log.warning(FOREIGN_RECORDS, extra={"records": list(foreign)})
        # What other replicas let through (taken from the shared copy) first, then its own.
        self.session.restore_through((d, False) for d in self._taken_through())
        rows = self.outbox.rows()
        self.session.restore_through(
            (r.decision, r.state == "dry") for r in rows if not (self.acting and r.state == "dry")
        )

    def _taken_through(self) -> list[Decision]:
        text = self.outbox.taken_through()
        if text is None:
            return []
        taken, why = decode_through(text)
        if why is not None:
            log.warning(
                "what other replicas let through unreadable: left out", extra={"error": why}
            )
        elif taken:
            log.info("what other replicas let through restored", extra={"decisions": len(taken)})
        return taken

    # --- the loops ---------------------------------------------------------------------------
    async def consume(self, backlog: Backlog) -> None:
        self._backlog = backlog
        while True:
            inputs, watched = await backlog.get()
            self.metrics.queue_depth.set(backlog.depth)
            self.feed(inputs, watched)

    async def timer(self, max_tick_s: float) -> None:
        self._max_tick_s = max_tick_s
        self.last_tick = self.clock.monotonic()
        while True:
            due = self.session.engine.next_deadline()
            pause = max_tick_s if due is None else min(max_tick_s, due - self.cluster.now())
            if self.behind is not None:  # a due timer waits for the catch-up: no spinning
                pause = max_tick_s
            self.rearm.clear()
            await wait(self.rearm, max(pause, 0.0), self.clock)
            self.tick()

    async def poll_kill_switch(self, every_s: float) -> None:
        while True:
            await self.clock.sleep(every_s)
            self.apply_kill_switch()

    def apply_kill_switch(self) -> None:
        """Read the switch (runtime/kill_switch_file.py: unreadable or unclear means on);
        each change of state, and of why it is unclear, is logged once."""
        path = self._kill_switch_file
        if not path:
            return
        reading = read_switch(path)
        if reading.unclear != self.kill_switch_unclear:
            self._switch_unclear(path, reading.unclear)
        engaged = reading.engaged
        if engaged != self._kill_switch:
            first = self._kill_switch is None
            self._kill_switch = engaged
            self.session.set_kill_switch(engaged, note=f"{path} says {reading.said}")
            self.metrics.kill_switch.set(1 if engaged else 0)
            level = logging.INFO if first and not engaged else logging.WARNING
            log.log(level, "kill switch " + ("engaged" if engaged else "off"), extra={"path": path})

    def _switch_unclear(self, path: str, why: str | None) -> None:
        if why is not None:
            log.error("kill switch file unclear: engaged", extra={"path": path, "error": why})
        elif self.kill_switch_unclear is not None:
            log.warning("kill switch file clear again", extra={"path": path})
        self.kill_switch_unclear = why
        self.metrics.kill_switch_unclear.set(0 if why is None else 1)
