"""The embedded runtime's own pieces, unchanged, as a controller of the simulated fleet.

    simulator ──feed──▶ Driver (Session, timers, guard state) ──▶ Outbox (SQLite file)
        ▲                                                            │
        └── take ◀── SimArgo ◀──Submit/Poll── Acting ──Tell──▶ SimSlack (rendered)

Everything runs on one `VirtualClock` that the simulation moves (`advance`), and one
event loop owned here: the worker's passes are run to their end inside each step, as
tests/runtime/test_virtual_clock.py runs them. The executors are the simulator behind
the real protocol (`carry(command) -> outcome`): a Submit hands the decision to the
simulation (`take`), which carries it out as it does for `CorePolicy`; a Poll answers
Ended once the simulation has applied it (`applied`). Slack messages are built by the
notifier's own `message()` (escaping included) and kept as plain text.

Worker passes run at the simulation's steps (every event and timer) when there is
something to do, not on the runtime's 2 s executor tick: a workflow's end is seen at
the next step after the simulation applied it.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from remediator.contract.actions import action
from remediator.contract.decision import Decision, Suppressed
from remediator.executors.argo_params import template_for, workflow_name
from remediator.executors.protocol import (
    Acted,
    Command,
    Ended,
    Note,
    Outcome,
    Poll,
    Posted,
    Refused,
    Running,
    Submit,
    Submitted,
    Tell,
    WouldHave,
)
from remediator.executors.slack import message
from remediator.inputs.records import Input
from remediator.policy_file import PolicyFile
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.session import Session
from remediator.sim.fleet.kube import BASE_TIME, rfc3339


class SimArgo:
    """Argo, played by the simulator: a workflow per decision, ended once applied."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.handed: list[Decision] = []  # submitted, not yet taken by the simulation
        self._started: dict[str, float] = {}  # workflow -> submitted at
        self._ended: dict[str, float] = {}  # workflow -> applied at
        self._unseen: set[str] = set()  # applied, its end not yet polled

    async def carry(self, command: Command) -> Outcome:
        if isinstance(command, Submit):
            d = command.decision
            name = workflow_name(d)
            created = name not in self._started
            if created:  # a re-submit is Argo's 409: done already, not handed twice
                self._started[name] = self.clock.now()
                self.handed.append(d)
            return Submitted(name, "argo", template_for(d), d.incident, created, "")
        if isinstance(command, Poll):
            name = command.workflow
            if name in self._ended:
                self._unseen.discard(name)
                started, ended = self._started[name], self._ended[name]
                return Ended(name, "Succeeded", "", rfc3339(int(started)), rfc3339(int(ended)))
            if name in self._started:
                return Running(name, "Running")
            return Refused(f"workflow {name} not found")
        return Refused(f"Argo carries Submit and Poll, not {type(command).__name__}")

    def applied(self, d: Decision) -> None:
        if not action(d.action).acts:
            return  # a note runs no workflow
        name = workflow_name(d)
        if name in self._started and name not in self._ended:
            self._ended[name] = self.clock.now()
            self._unseen.add(name)

    def waiting(self) -> bool:
        """Some workflow has ended and the worker has not yet seen it end."""
        return bool(self._unseen)


@dataclass(frozen=True, slots=True)
class Post:
    ts: str
    at: float  # when it was posted (the clock's wall time)
    thread: str | None  # the act message's ts for a thread reply
    note: Note
    text: str  # the message as plain text, from the notifier's own blocks


def plain_text(note: Note) -> str:
    """The message the notifier would post for `note` (its blocks, escaped as sent), as
    lines of text: a field's or section's "*Title*\\nvalue" becomes "*Title*: value"."""
    _, blocks = message(note)
    lines: list[str] = []
    for block in blocks:
        texts = [block["text"]] if "text" in block else []
        texts += block.get("fields", []) + block.get("elements", [])
        lines += [t["text"].replace("\n", ": ", 1) for t in texts]
    return "\n".join(lines)


class SimSlack:
    """Slack, played by the simulator: each Tell is rendered and kept, and answered Posted."""

    def __init__(self, clock: VirtualClock, show: Callable[[Post], None] | None = None) -> None:
        self.clock = clock
        self.posts: list[Post] = []
        self._show = show

    async def carry(self, command: Command) -> Outcome:
        if not isinstance(command, Tell):
            return Refused(f"Slack carries Tell, not {type(command).__name__}")
        post = Post(f"{len(self.posts) + 1}.000000", self.clock.now(), command.thread,
                    command.note, plain_text(command.note))  # fmt: skip
        self.posts.append(post)
        if self._show is not None:
            self._show(post)
        return Posted(post.ts)


class RuntimePolicy:
    """The runtime (Driver, Outbox, Acting) with the simulator as its cluster, Argo
    and Slack. Call `close()` when done (the event loop and the state file)."""

    wants_inputs = True

    def __init__(
        self,
        name: str,
        config: PolicyFile,
        *,
        show: Callable[[Post], None] | None = None,
        workflow_poll_s: float = 5.0,
    ) -> None:
        self.name = name
        logs = config.rules.engine_logs
        self.follows_logs = logs.max_pods if logs.follow else 0  # as serve's follower would
        self._dir = tempfile.TemporaryDirectory(prefix="remediator-sim-")
        self.loop = asyncio.new_event_loop()
        self.clock = VirtualClock(float(BASE_TIME))  # the simulation's t = 0, as wall time
        self.outbox = Outbox(Path(self._dir.name) / "state.db", self.clock.now)
        self.session = Session(config)
        self.metrics = RuntimeMetrics.on(CollectorRegistry())
        self.argo, self.slack = SimArgo(self.clock), SimSlack(self.clock, show)
        self.worker = Acting(OutboxRows(self.outbox), self.argo, self.slack, self.clock,
                                   self.metrics, "sim",
                                   WorkerSettings(poll_s=workflow_poll_s))  # fmt: skip
        self.worker.lead(True, None)
        self.driver = Driver(self.session, self.outbox, self.clock, self.metrics,
                             leading=lambda: self.worker.leading, wake_worker=self._wake,
                             simulated=self._would_have)  # fmt: skip
        self._woken = False
        self._would: list[Suppressed] = []  # dry-run notes, told in the next pass
        self._order: dict[tuple[str, str], int] = {}  # (incident, action) -> outbox row id
        self._notified: list[Decision] = []  # notes only (notify): told is carried out
        self._told = 0  # Slack posts looked at

    # --- the controller protocol -----------------------------------------------------------
    def feed(self, item: Input) -> None:
        self.driver.feed([item])

    def advance(self, now: float) -> None:
        self._run(self._step(now))

    def take(self) -> list[Decision]:
        """What the worker carried out since the last take, in the order it was decided
        (outbox row order): Submits, and notes that act on nothing (notify). Rows an input
        wrote since the last step are carried first, as the core's are taken at once."""
        if self._woken or self._would:
            self._run(self._step(self.clock.now()))
        out = [*self.argo.handed, *self._notified]
        self.argo.handed, self._notified = [], []
        out.sort(key=lambda d: self._order.get((d.incident, d.action), 0))
        for d in out:
            self._order.pop((d.incident, d.action), None)
        return out

    def applied(self, decision: Decision) -> None:
        self.argo.applied(decision)

    def next_due(self) -> float | None:
        due = self.session.engine.next_deadline()
        return None if due is None else max(due, self.session.now + 1e-3)

    def held(self) -> int:
        held = 0.0
        for metric in self.session.registry.collect():
            if metric.name == "remediator_suppressed":
                held += sum(s.value for s in metric.samples if s.name.endswith("_total"))
        return int(held)

    def close(self) -> None:
        self._run(self.worker.close())
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()
        self.outbox.close()
        self._dir.cleanup()

    # --- inside ----------------------------------------------------------------------------
    def _run(self, step: Coroutine[Any, Any, None]) -> None:
        self.loop.run_until_complete(step)

    async def _step(self, now: float) -> None:
        if now > self.clock.now():
            await self.clock.advance(now - self.clock.now())
        self.driver.tick()
        if not (self._woken or self._would or self.argo.waiting()):
            return  # nothing for the worker: a pass would only look
        if self._woken:
            self._woken = False
            for row in await asyncio.to_thread(self.outbox.open_rows):
                self._order[(row.incident, row.decision.action)] = row.id
        for held in self._would:
            self.worker.note(WouldHave(held.decision, held.reason))
        self._would.clear()
        await self.worker.step()
        await self.worker.idle()
        for post in self.slack.posts[self._told :]:
            d = post.note.decision
            if isinstance(post.note, Acted) and not action(d.action).acts:
                self._notified.append(d)
        self._told = len(self.slack.posts)

    def _wake(self) -> None:
        self._woken = True

    def _would_have(self, held: Suppressed) -> None:
        self._would.append(held)
