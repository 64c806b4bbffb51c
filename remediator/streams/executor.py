"""The executor agent: commands → the acting component's rows → Argo and Slack.

A Kafka worker acts as `serve` does, with the same component (`runtime.worker.Acting`):
each command taken from the commands topic becomes a row in the `acting` table (its
changelog topic the truth, `streams.rows.TableRows`), and the acting component moves the
rows of the commands partitions this worker holds: Submit, the act message, Poll until
the workflow ends, the end reply in the act's thread, retries with backoff on the
monotonic clock. Everything is carried through `carry(command) -> outcome`.

    commands (key incident) ──▶ executor agent ── a row per (incident, action) ──▶ acting
                                                  (a redelivered command: the row is there)
                                 └─ Tell(WouldHave) (a dry run's "would have") ──▶ told
    acting table ◀── every move of a row ── Acting ── Submit/Poll ──▶ Argo | DryRunRecorder
                                                 └── Tell ──▶ Slack (or the recorder)

A command's offset is committed after its row is on the broker and its first move was
made; a worker SIGKILLed after that leaves the row to the worker that takes the partition
over, which restores the table and carries on from the row (following a workflow to its
end, posting what was not posted, looking in the channel first for a post that may have
gone through). The workflow name is derived from the incident, so a Submit made twice is
a 409, counted as done.

The commands topic carries decisions and, from the guard, a dry run's `Tell(WouldHave)`
(`would_have`), both through `contract.codec`; the note is told as serve tells it, once
per record, not kept as a row (serve keeps none either).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import faust
from faust.types import TP, EventT, StreamT, TopicT
from prometheus_client import CollectorRegistry

from remediator.contract.actions import action
from remediator.contract.codec import DecodeError, decode, encode
from remediator.contract.decision import Decision, Suppressed
from remediator.executors import argo_params
from remediator.executors.protocol import (
    Acted,
    Command,
    Ended,
    Executor,
    Outcome,
    Poll,
    Posted,
    Refused,
    Submit,
    Submitted,
    Tell,
    WouldHave,
)
from remediator.runtime.clock import SystemClock
from remediator.runtime.metrics import ActingCounters, OutboxCollector
from remediator.runtime.rows import Row
from remediator.runtime.worker import Acting, Look, WorkerSettings
from remediator.streams.batches import waiting
from remediator.streams.metrics import WorkerMetrics
from remediator.streams.progress import Progress
from remediator.streams.rows import TableRows

log = logging.getLogger(__name__)

TABLE = "acting"  # the table's name; its changelog topic is "<group>-acting-changelog"


@dataclass(frozen=True, slots=True)
class Executors:
    """Who carries what: the cluster's executor (Argo, or the dry-run recorder) and the
    notifier (Slack, the recorder in a dry run, or none)."""

    cluster: Executor
    notifier: Executor | None = None
    settings: WorkerSettings = WorkerSettings()
    pass_s: float = 1.0  # how often the open rows are looked at (polls keep to poll_s)
    look: Look | None = None  # a pod looked at again before it is deleted (serve's PodLook)


def would_have(held: Suppressed) -> bytes:
    """The commands-topic record of a dry run's "would have" (the guard sends it)."""
    return encode(Tell(WouldHave(held.decision, held.reason)))


def read_command(value: bytes) -> Decision | Tell:
    """A decision to act on, or a note to tell: a tagged record starts with its tag."""
    if value.startswith(b'{"type":'):
        return decode(value, Tell)
    return decode(value, Decision)


def install_acting(
    app: faust.App,
    commands: TopicT,
    partitions: int,
    executors: Executors,
    registry: CollectorRegistry,
    metrics: WorkerMetrics,
    batch_most: int = 500,
    progress: Progress[TP] | None = None,
) -> Acting:
    """The executor agent, the acting table and the acting component, on `app`."""
    table = app.Table(TABLE, partitions=partitions, store="memory://", key_type=bytes,
                      value_type=bytes)  # fmt: skip
    held: set[int] = set()

    async def write(partition: int, key: bytes, value: bytes | None) -> None:
        # On the broker (acks=all) before anything goes on: this record's own ack is
        # awaited, not a flush of the whole producer (which also waited for every other
        # row's and agent's records, one at a time, and cost a third of the worker's CPU).
        sent = await table.changelog_topic.send(key=key, value=value, partition=partition)
        await sent

    clock = SystemClock()
    rows = TableRows(table.data, write, clock.now, owned=lambda p: p in held)
    registry.register(OutboxCollector(rows))
    acting = Acting(rows, executors.cluster, executors.notifier, clock,
                    ActingCounters.on(registry), f"{app.conf.id}-{os.getpid()}",
                    executors.settings, is_leader=lambda: not app.rebalancing)  # fmt: skip
    acting.look = executors.look

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(sender: Any, revoked: set[TP], **_: Any) -> None:
        if any(tp.topic == commands.get_topic_name() for tp in revoked):
            held.clear()
            acting.lead(False, None)  # what it was carrying stops; the rows stay

    @table.on_recover
    async def on_recovered() -> None:
        """The table holds the rows of the partitions assigned: carry on with them."""
        name = commands.get_topic_name()
        held.clear()
        held.update(tp.partition for tp in app.consumer.assignment() if tp.topic == name)
        acting.lead(True, None)

    async def take(event: EventT[bytes]) -> Row | None:
        """One command into its row (None: nothing to carry)."""
        msg = event.message
        try:
            command = read_command(msg.value or b"")
        except DecodeError as exc:
            metrics.commands.labels("", "bad").inc()
            log.error("bad command skipped", extra={"offset": msg.offset, "error": str(exc)})
            return None
        if isinstance(command, Tell):
            metrics.commands.labels(command.note.decision.action, "told").inc()
            acting.note(command.note)
            return None
        held.add(msg.partition)  # given to us now: ours (recovery may be behind)
        row = await rows.add(command, msg.partition)
        metrics.commands.labels(command.action, "new" if row else "redelivered").inc()
        metrics.latency(time.time() - msg.timestamp)
        return row

    @app.agent(commands)
    async def executor(stream: StreamT[bytes]) -> AsyncIterator[None]:
        # A batch's rows are written together and carried together (each its own task,
        # as the acting component carries them): their writes share the producer's
        # flushes, where one command at a time waited for each of its own in turn.
        batch: Sequence[EventT[bytes]]
        async for batch in waiting(stream, batch_most, progress):
            added = await asyncio.gather(*(take(event) for event in batch))
            await asyncio.gather(*(acting.act_now(row) for row in added if row is not None))
            yield None

    @app.timer(executors.pass_s)  # type: ignore[untyped-decorator]
    async def act() -> None:
        await acting.step()

    return acting


class DryRunRecorder:
    """The executor of a worker without Argo: writes what would run, one JSON line per
    workflow name (and per notice, `notify-<incident>`), each name once, as Argo would
    refuse a second submit under one name: workers sharing the file (on one host) check
    it under a lock, so a command redelivered to another worker records nothing.

    As the cluster's executor: Submit records and answers Submitted (created only the
    first time); Poll answers that it ended "Recorded" (nothing ran). As the notifier
    (no Slack configured): a note-only decision's notice is recorded; every Tell is
    answered Posted, so the rows close as they would with Slack."""

    def __init__(self, path: str | None) -> None:
        self._path = Path(path) if path else None
        self._seen: set[str] = set()
        self._read_to = 0  # the file's bytes read into `_seen` (every worker appends)
        self._file: tuple[int, int] | None = None  # (device, inode) of the file read

    async def carry(self, command: Command) -> Outcome:
        if isinstance(command, Submit):
            d = command.decision
            if d.action not in argo_params.WORKFLOWS:
                return Refused(f"{d.action} runs no workflow", "refused")
            name = argo_params.workflow_name(d)
            created = self._record(name, d)
            return Submitted(name, "", "", d.incident, created, "")
        if isinstance(command, Poll):
            return Ended(command.workflow, "Recorded", "dry run: recorded, never run", None, None)
        d = command.note.decision
        if isinstance(command.note, Acted) and not action(d.action).acts:
            self._record(f"notify-{d.incident}", d)
        return Posted(f"dry-run-{d.incident}-{type(command.note).__name__.lower()}")

    def _record(self, name: str, d: Decision) -> bool:
        """True if `name` was recorded now, False if it was already."""
        if name in self._seen:
            return False
        if self._path is None:
            self._seen.add(name)
            return True
        line = {"workflow": name, "incident": d.incident, "action": d.action,
                "namespace": d.namespace, "target": d.target, "uid": d.uid}  # fmt: skip
        with self._path.open("a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            self._read_new(f)
            if name in self._seen:
                return False
            f.write(json.dumps(line).encode() + b"\n")
            f.flush()
            self._read_to = f.tell()
            self._seen.add(name)
        return True

    def _read_new(self, f: BinaryIO) -> None:
        """What other workers appended since the last look (under the lock): the file is
        only appended to, so each byte is read once, not the whole file per command (a
        dry run kept for weeks). A file replaced (another inode, or shorter than what was
        read) is read again from its start."""
        stat = os.fstat(f.fileno())
        end = f.seek(0, os.SEEK_END)
        if (stat.st_dev, stat.st_ino) != self._file or end < self._read_to:
            self._file, self._read_to = (stat.st_dev, stat.st_ino), 0
        f.seek(self._read_to)
        new = f.read(end - self._read_to)
        whole = new[: new.rfind(b"\n") + 1]  # a line is written whole under the lock
        for seen in whole.splitlines():
            if seen.strip():
                self._seen.add(json.loads(seen)["workflow"])
        self._read_to += len(whole)
