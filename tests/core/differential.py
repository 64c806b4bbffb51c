"""Streams and runs for the dry-run differential: one stream, live and dry, compared.

A stream is what a live run saw, step by step: inputs (`Feed`), clock moves (`Advance`)
and a deleted pod's timeline being let go (`Forget`, as the simulator's controller and the
runtime's pruning do). The recorded files of tests/data are streams of inputs; the fleet
simulator's are recorded while the live core remediates the fleet (`record_fleet`), so the
dry run sees exactly the world the live run's actions made.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.contract.actions import action
from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.decode import InputError, decode
from remediator.inputs.records import Input, PodSeen
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox
from remediator.session import Session
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.scenario import Scenario
from remediator.sim.fleet.simulation import Simulation
from remediator.timeline.tracker import StateChange


@dataclass(frozen=True, slots=True)
class Feed:
    item: Input


@dataclass(frozen=True, slots=True)
class Advance:
    now: float


Step = Feed | Advance
# (action, target, time): what got through, acted (live) or "would" (dry)
Through = tuple[str, str, float]


def file_stream(path: Path) -> list[Step]:
    steps: list[Step] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            items = decode(line)
        except InputError:
            continue  # replay skips it too (tests/data/bad_lines.jsonl)
        steps.extend(Feed(item) for item in items)
    last = max((s.item.at for s in steps if isinstance(s, Feed) and s.item.at), default=None)
    if last is not None:
        steps.append(Advance(last + 3 * 3600))
    return steps


class _Recording(CorePolicy):
    """The live core on the fleet, keeping the stream it saw and what it let through."""

    def __init__(self, config: PolicyFile) -> None:
        super().__init__("live", config)
        self.steps: list[Step] = []
        self.through: list[Through] = []

    def feed(self, item: Input) -> None:
        self.steps.append(Feed(item))
        super().feed(item)

    def advance(self, now: float) -> None:
        self.steps.append(Advance(now))
        super().advance(now)

    def take(self) -> list[Decision]:
        out = super().take()
        self.through.extend((d.action, d.target, d.at) for d in out)
        return out


def record_fleet(scenario: Scenario, seed: int, config: PolicyFile) -> tuple[list[Step], int]:
    """The stream the live core saw remediating the fleet, and how many kill loops it made."""
    live = _Recording(config)
    result = Simulation(scenario, seed, live).run()
    return live.steps, result.kill_loops


class Through_(list[Through]):
    """A Sink: what got through, in order; and how many a guardrail held for good."""

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.append((decision.action, decision.target, decision.at))

    def suppressed(self, suppressed: Suppressed) -> None:
        if suppressed.simulated:
            d = suppressed.decision
            self.append((d.action, d.target, d.at))

    def ignored(self, ignored: Ignored) -> None:
        pass


def through_session(steps: list[Step], config: PolicyFile) -> list[Through]:
    """What got through one `Session` fed the stream (acted, or dry "would")."""
    session, sink = Session(config), Through_()
    for step in steps:
        if isinstance(step, Feed):
            session.feed(step.item, sink)
            _forget_deleted(session, step.item)
        else:
            session.advance(step.now, sink)
    return list(sink)


def _forget_deleted(session: Session, item: Input) -> None:
    if isinstance(item, PodSeen) and item.watch == "DELETED":
        session.tracker.forget(item.uid)  # as CorePolicy (and the runtime's pruning) do


@dataclass
class DriverRun:
    through: list[Through]  # the outbox's rows, in row order: pending (acted) or dry
    announced: int  # "would have" notes handed on to be told (dry run)


async def through_driver(steps: list[Step], config: PolicyFile, restart_at: int) -> DriverRun:
    """The embedded runtime's driver and outbox on a state file, restarted (the file
    reopened, the guard state restored) before step `restart_at`; the new process sees
    the cluster again from the start (a relist and the events it lists)."""
    with tempfile.TemporaryDirectory(prefix="remediator-diff-") as tmp:
        path = Path(tmp) / "state.db"
        clock = VirtualClock(0.0)
        announced: list[Suppressed] = []
        for part in (steps[:restart_at], steps):
            outbox = Outbox(path, clock.now)
            driver = Driver(
                Session(config),
                outbox,
                clock,
                RuntimeMetrics.on(CollectorRegistry()),
                leading=lambda: True,
                wake_worker=lambda: None,
                simulated=announced.append,
            )
            driver.restore()
            for step in part:
                if isinstance(step, Feed):
                    if step.item.at is not None and not driver.cluster.known:
                        await clock.advance(step.item.at - clock.now())
                    driver.feed([step.item])
                    _forget_deleted(driver.session, step.item)
                else:
                    ahead = step.now - driver.cluster.now()
                    if ahead > 0:
                        await clock.advance(ahead)
                    driver.tick()
            rows = outbox.rows()
            outbox.close()
        through = [(r.decision.action, r.decision.target, r.decision.at) for r in rows]
        return DriverRun(through, len(announced))


def acting(through: list[Through]) -> Iterator[Through]:
    return (t for t in through if action(t[0]).acts)
