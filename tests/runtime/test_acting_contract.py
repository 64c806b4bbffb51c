"""One contract for both stores of the acting component (`runtime.rows.RowStore`): serve's
SQLite outbox (`OutboxRows`) and the Kafka worker's table (`streams.rows.TableRows`), and
the acting component over each: the same lifecycle, the same retries on the injected
clock, Slack told once, a workflow followed to its end, and a process killed mid-follow
resumed by the next one.

The SQLite store is real (a file; the "killed" process's connection is abandoned, never
closed). The table's store is the changelog as the broker keeps it after compaction: a
dict of each key's last acknowledged value; a killed worker loses its memory, the next
one restores the table from it (as Faust's in-memory store does on assignment). Argo and
Slack are scripted `Recorder`s (no server); tests/kafka/test_acting.py runs the table
store on a real broker with a worker SIGKILLed mid-follow.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.executors.protocol import (
    Acted,
    Command,
    CouldNot,
    Ended,
    Finished,
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
from remediator.executors.recorder import Recorder
from remediator.runtime.clock import VirtualClock
from remediator.runtime.metrics import ActingCounters
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.rows import SUBMITTING, Row
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.streams.rows import TableRows
from tests.executors.conftest import delete_decision

T0 = 1_750_000_000.0
SETTINGS = WorkerSettings(poll_s=5.0, retry_s=2.0, max_retry_s=60.0)


# --- the two stores, each able to lose its process and come back --------------------------


class Sqlite:
    name = "sqlite"

    def __init__(self, tmp: Path, clock: VirtualClock) -> None:
        self.path, self.clock = tmp / "state.db", clock
        self.store = self.open()

    def open(self) -> OutboxRows:
        return OutboxRows(Outbox(self.path, self.clock.now))

    async def add(self, decision: Decision) -> None:
        await self.store.add(decision)

    def crash(self) -> None:
        """The process is gone without closing anything; the next opens the file."""
        self.store = self.open()


@dataclass
class Changelog:
    """A compacted changelog topic: each key's last acknowledged value (None: a tombstone)."""

    log: dict[bytes, bytes] = field(default_factory=dict)
    writes: int = 0

    async def write(self, partition: int, key: bytes, value: bytes | None) -> None:
        self.writes += 1
        if value is None:
            self.log.pop(key, None)
        else:
            self.log[key] = value


class Table:
    name = "table"

    def __init__(self, tmp: Path, clock: VirtualClock) -> None:
        self.clock, self.changelog = clock, Changelog()
        self.store = self.open()

    def open(self) -> TableRows:
        restored = dict(self.changelog.log)  # the in-memory store, rebuilt from the changelog
        return TableRows(restored, self.changelog.write, self.clock.now)

    async def add(self, decision: Decision) -> None:
        await self.store.add(decision, partition=0)

    def crash(self) -> None:
        self.store = self.open()


Store = Sqlite | Table


@pytest.fixture(params=[Sqlite, Table], ids=["sqlite", "table"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    kind: type[Store] = request.param
    return kind(tmp_path, VirtualClock(T0))


# --- the store's contract -------------------------------------------------------------------


async def test_a_decision_is_one_pending_row_however_often_it_comes(store: Store) -> None:
    d = delete_decision()
    await store.add(d)
    await store.add(d)  # redelivered
    (row,) = await store.store.open_rows()
    assert (row.decision, row.state, row.attempts, row.created_at) == (d, "pending", 0, T0)


async def test_a_mark_is_kept_across_a_crash(store: Store) -> None:
    await store.add(delete_decision())
    (row,) = await store.store.open_rows()
    await store.store.mark(row, "submitted", workflow="wf-1", act_at=T0 + 1, attempts=2)
    store.crash()
    (row,) = await store.store.open_rows()
    assert (row.state, row.workflow, row.act_at, row.attempts) == ("submitted", "wf-1", T0 + 1, 2)
    assert row.slack_ts is None


async def test_open_means_to_act_to_follow_or_still_to_tell(store: Store) -> None:
    for n in range(4):
        await store.add(delete_decision(incident=f"i-{n}"))
    a, b, c, d = await store.store.open_rows()
    await store.store.mark(a, "ended", phase="Succeeded")
    await store.store.mark(b, "failed", error="no", end_at=T0)  # its "could not act" untold
    await store.store.mark(c, "failed", error="no", end_at=T0, end_ts="ts-9")  # told
    await store.store.mark(d, "submitted", workflow="wf")
    assert [r.incident for r in await store.store.open_rows()] == ["i-1", "i-3"]


async def test_an_unknown_field_is_refused(store: Store) -> None:
    await store.add(delete_decision())
    (row,) = await store.store.open_rows()
    with pytest.raises(ValueError, match="unknown"):
        await store.store.mark(row, None, colour="red")


async def test_old_pending_rows_expire_and_closed_ones_are_pruned(store: Store) -> None:
    await store.add(delete_decision(incident="old"))
    await store.store.mark((await store.store.open_rows())[0], "ended", phase="Succeeded")
    await store.add(delete_decision(incident="stale"))
    clock = store.clock
    await clock.advance(100)
    await store.add(delete_decision(incident="fresh"))
    (stale,) = await store.store.expire(T0 + 50, "too old")
    assert stale.incident == "stale"
    assert [r.incident for r in await store.store.open_rows()] == ["fresh"]
    assert await store.store.prune(T0 + 150) == 2  # "old" (ended) and "stale" (expired)
    assert await store.store.prune(T0 + 150) == 0
    store.crash()
    assert [r.incident for r in await store.store.open_rows()] == ["fresh"]


# --- the acting component over each store ----------------------------------------------------


class Argo:
    """Submit -> Submitted (or `down` times Unavailable first); Poll -> `running` times
    Running, then Ended."""

    def __init__(self, running: int = 1, down: int = 0, refuse: bool = False) -> None:
        self.running, self.down, self.refuse = running, down, refuse

    def __call__(self, command: Command) -> Outcome:
        if isinstance(command, Submit):
            if self.refuse:
                return Refused("bad parameter")
            if self.down > 0:
                self.down -= 1
                return Unavailable("argo down")
            d = command.decision
            return Submitted("wf-1", "argo", "t", d.incident, True, "http://ui/wf-1")
        assert isinstance(command, Poll)
        if self.running > 0:
            self.running -= 1
            return Running(command.workflow, "Running", "http://ui/wf-1")
        return Ended(command.workflow, "Succeeded", "", None, None, "http://ui/wf-1")


def slack_ok() -> Callable[[Command], Outcome]:
    count = iter(range(1, 1000))
    return lambda command: Posted(f"ts-{next(count)}")


class Process:
    """One process's acting component over `store`, on the store's virtual clock."""

    def __init__(self, store: Store, argo: Argo, slack: Callable[[Command], Outcome]) -> None:
        self.store, self.clock = store, store.clock
        self.argo, self.slack = Recorder(argo), Recorder(slack)
        self.acting = Acting(store.store, self.argo, self.slack, self.clock,
                             ActingCounters.on(CollectorRegistry()), "me", SETTINGS)  # fmt: skip
        self.acting.lead(True, None)

    async def at(self, t: float) -> None:
        await self.clock.advance(T0 + t - self.clock.now())
        await self.acting.step()
        await self.acting.idle()

    def told(self) -> list[Tell]:
        return [c for c in self.slack.carried if isinstance(c, Tell)]

    def commands(self, kind: type) -> list[Command]:
        return [c for c in self.argo.carried if isinstance(c, kind)]


async def rows(store: Store) -> list[Row]:
    return await store.store.open_rows()


async def test_a_workflow_is_told_then_followed_to_its_end_in_its_thread(store: Store) -> None:
    p = Process(store, Argo(running=2), slack_ok())
    await store.add(delete_decision())
    for t in range(0, 20, 5):
        await p.at(t)
    act, end = p.told()
    assert isinstance(act.note, Acted) and act.thread is None
    assert isinstance(end.note, Finished) and end.thread == "ts-1"
    assert end.note.ended.phase == "Succeeded"
    assert len(p.commands(Submit)) == 1 and len(p.commands(Poll)) == 3
    assert await rows(store) == []


async def test_an_unavailable_executor_is_retried_with_backoff_on_the_clock(store: Store) -> None:
    p = Process(store, Argo(down=2), slack_ok())
    await store.add(delete_decision())
    await p.at(0)  # down: next try after 2 s
    await p.at(1.9)
    assert len(p.commands(Submit)) == 1
    await p.at(2)  # down again: next after 4 s more
    await p.at(5.9)
    assert len(p.commands(Submit)) == 2
    await p.at(6)
    assert len(p.commands(Submit)) == 3
    (row,) = await rows(store)
    assert (row.state, row.attempts) == ("submitted", 2)


async def test_a_refused_command_fails_and_is_told_once(store: Store) -> None:
    p = Process(store, Argo(refuse=True), slack_ok())
    await store.add(delete_decision())
    for t in (0, 5, 10):
        await p.at(t)
    (told,) = p.told()
    assert isinstance(told.note, CouldNot) and "bad parameter" in told.note.error
    assert await rows(store) == []


async def test_a_note_only_decision_is_told_once_and_ends(store: Store) -> None:
    p = Process(store, Argo(), slack_ok())
    await store.add(replace(delete_decision(), action="notify"))
    for t in (0, 5):
        await p.at(t)
    (told,) = p.told()
    assert isinstance(told.note, Acted) and told.note.decision.action == "notify"
    assert p.argo.carried == [] and await rows(store) == []


def node_notice() -> Decision:
    return Decision("notify", "", "gpu-node-3", "GPU memory on gpu-node-3 did not settle",
                    "gpu-memory-node-3", T0)  # fmt: skip


async def test_a_decision_told_under_an_incident_goes_into_its_thread(store: Store) -> None:
    """A deletion on a node found unsettled: its act message, and its end, reply under the
    node's message; the channel shows one line for the node, however many pods go."""
    p = Process(store, Argo(running=0), slack_ok())
    await store.add(node_notice())
    await p.at(0)
    (notice,) = p.told()
    assert notice.thread is None
    for n in range(2):
        d = delete_decision(incident=f"stuck-{n}", told_under="gpu-memory-node-3")
        await store.add(d)
    for t in (5, 10, 15):
        await p.at(t)
    told = p.told()[1:]
    assert sorted(type(t.note).__name__ for t in told) == ["Acted", "Acted", "Finished", "Finished"]
    assert {t.thread for t in told} == {"ts-1"}, "each into the node's thread, never a reply's"
    assert await rows(store) == []


async def test_with_no_message_to_reply_under_it_is_told_in_the_channel(store: Store) -> None:
    """Nothing lost: the incident it is told under never got a message here (Slack refused
    it, or another process holds it), so it is told as any other, in its own thread."""
    p = Process(store, Argo(running=0), slack_ok())
    await store.add(delete_decision(told_under="gpu-memory-node-3"))
    for t in (0, 5):
        await p.at(t)
    act, end = p.told()
    assert isinstance(act.note, Acted) and act.thread is None
    assert isinstance(end.note, Finished) and end.thread == "ts-1"


async def test_killed_mid_follow_the_next_process_follows_to_the_end(store: Store) -> None:
    """Submitted and told, then the process dies while the workflow runs: the next one
    submits nothing, tells the act nothing more, and replies the end under the act."""
    first = Process(store, Argo(running=100), slack_ok())
    await store.add(delete_decision())
    await first.at(0)
    await first.at(5)
    assert [type(t.note) for t in first.told()] == [Acted]
    store.crash()
    second = Process(store, Argo(running=1), slack_ok())
    for t in (10, 15, 20):
        await second.at(t)
    assert second.commands(Submit) == []
    (end,) = second.told()
    assert isinstance(end.note, Finished) and end.thread == "ts-1"
    assert await rows(store) == []


async def test_a_submit_is_on_record_before_the_call(store: Store) -> None:
    """Killed between the submit and its answer, the row says a workflow may exist (so a pod
    gone meanwhile, perhaps by that workflow, does not drop it): here the answer never came."""
    p = Process(store, Argo(down=1), slack_ok())
    await store.add(delete_decision())
    await p.at(0)
    store.crash()
    (row,) = await rows(store)
    assert (row.state, row.phase, row.workflow) == ("pending", SUBMITTING, None)
    await Process(store, Argo(running=0), slack_ok()).at(60)
    (row,) = await rows(store)
    assert (row.state, row.phase, row.workflow) == ("submitted", None, "wf-1")


async def test_killed_mid_post_the_next_process_looks_before_posting_again(store: Store) -> None:
    """The act message's intent was stored, its answer never: the next process asks the
    notifier to look for it (`unsure_since`) rather than post it blindly twice."""
    lost: list[Command] = []

    def slack_dies(command: Command) -> Outcome:
        lost.append(command)
        raise SystemExit("killed mid-post")  # the process dies inside the post

    first = Process(store, Argo(running=100), slack_dies)
    await store.add(delete_decision())
    with pytest.raises(SystemExit):
        await first.acting._advance((await rows(store))[0])  # the row's one task, in line
    assert len(lost) == 1
    store.crash()
    second = Process(store, Argo(running=100), slack_ok())
    await second.at(5)
    (act,) = second.told()
    assert isinstance(act.note, Acted) and act.unsure_since == T0
    assert second.commands(Submit) == []  # the workflow name was stored before the post


async def test_a_pod_no_longer_stuck_is_spared_and_told_once(store: Store) -> None:
    """The look again before a delete (serve's PodLook, the worker's --look-again): a pod
    Ready again is not deleted; a look that fails waits and looks again."""
    p = Process(store, Argo(), slack_ok())
    looks: list[str] = []

    async def look(d: Decision) -> str | None:
        looks.append(d.incident)
        if len(looks) == 1:
            raise ConnectionError("API server unreachable")
        return "Ready again"

    p.acting.look = look
    await store.add(delete_decision())
    for t in (0, 1, 2, 5):
        await p.at(t)
    (told,) = p.told()
    assert isinstance(told.note, Spared) and told.note.reason == "Ready again"
    assert len(looks) == 2 and p.argo.carried == [] and await rows(store) == []


# --- the two stores, differentially: any sequence of calls, the same rows ---------------------

STATES_TO_MARK = ("submitted", "ended", "failed", None)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 4)),
        st.tuples(st.just("mark"), st.integers(0, 4), st.sampled_from(STATES_TO_MARK),
                  st.sampled_from(["workflow", "slack_ts", "end_at", "end_ts", "attempts"])),
        st.tuples(st.just("expire"), st.integers(0, 60)),
        st.tuples(st.just("prune"), st.integers(0, 60)),
        st.tuples(st.just("advance"), st.integers(1, 20)),
        st.tuples(st.just("crash")),
    ),
    max_size=30,
)  # fmt: skip


def _seen(rows: list[Row]) -> list[tuple[object, ...]]:
    """A row as both stores must show it (the id is each store's own handle)."""
    return [(r.incident, r.state, r.workflow, r.slack_ts, r.end_at, r.end_ts, r.attempts,
             r.error, r.created_at) for r in rows]  # fmt: skip


async def _apply(store: Store, op: tuple[object, ...]) -> object:
    kind = op[0]
    if kind == "add":
        return await store.add(delete_decision(incident=f"i-{op[1]}"))
    if kind == "mark":
        found = [r for r in await store.store.open_rows() if r.incident == f"i-{op[1]}"]
        if not found:
            return None
        value: str | float = 3 if op[3] == "attempts" else (T0 + 1 if op[3] == "end_at" else "v")
        return await store.store.mark(found[0], op[2], **{str(op[3]): value})  # type: ignore[arg-type]
    if kind == "expire":
        return _seen(await store.store.expire(T0 + float(op[1]), "old"))  # type: ignore[arg-type]
    if kind == "prune":
        return await store.store.prune(T0 + float(op[1]))  # type: ignore[arg-type]
    if kind == "advance":
        return await store.clock.advance(float(op[1]))  # type: ignore[arg-type]
    store.crash()
    return None


@settings(max_examples=150, deadline=None)
@given(ops)
def test_both_stores_keep_the_same_rows_whatever_is_done_to_them(steps: list[tuple]) -> None:
    async def run() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite, table = Sqlite(Path(tmp), VirtualClock(T0)), Table(Path(tmp), VirtualClock(T0))
            for op in steps:
                assert await _apply(sqlite, op) == await _apply(table, op), op
                assert _seen(await sqlite.store.open_rows()) == _seen(await table.store.open_rows())

    asyncio.run(run())
