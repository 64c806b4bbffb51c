"""The pods table of one partition (`streams.pods`), over a dict as the table: a deleted
pod's records leave it once its core forgot the pod, and a core rebuilt from what is
left knows what the live one knows (the cold starts the pod finished included)."""

from __future__ import annotations

from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from remediator.policy_file import PolicyFile
from remediator.streams.core import FORGET_AFTER_S, Learned, PartitionCore, tick_record
from remediator.streams.pods import ROW_BYTES, PartitionRows
from tests.policy.builders import T0, event, pod

P, N = 3, 8
GONE, ALIVE = "vllm-70b-7c9d5b6f4-gone1", "vllm-70b-7c9d5b6f4-live1"


def life(name: str, uid: str, start: float, deleted: bool) -> list[dict[str, Any]]:
    """A pod created, scheduled, pulled, started and Ready (a finished cold start)."""
    docs = [
        pod(name, uid, watch="ADDED", created=start),
        pod(name, uid, created=start, scheduled=start + 1),
        event("Pulling", "Pulling image", start + 2, pod_name=name, uid=uid),
        event("Pulled", "Successfully pulled image in 40s", start + 42, pod_name=name, uid=uid),
        pod(name, uid, created=start, scheduled=start + 1, started=start + 43),
        pod(name, uid, created=start, scheduled=start + 1, started=start + 43, ready=start + 160),
    ]
    if deleted:
        docs.append(pod(name, uid, watch="DELETED", created=start, scheduled=start + 1,
                        started=start + 43, ready=start + 160))  # fmt: skip
    return docs


class Partition:
    """What the worker does with one partition's records, batch by batch."""

    def __init__(self, table: dict[str, Any]) -> None:
        self.core = PartitionCore(PolicyFile(), P, N, CollectorRegistry())
        self.rows = PartitionRows(table, P)
        self.offset = 0
        self.learned: list[Learned] = []

    def take(self, raw: bytes, key: str) -> None:
        out = self.core.feed(raw, source=(self.offset, 0))
        self.learned += [r for r in out if isinstance(r, Learned)]
        self.rows.add(self.offset, raw.decode(), key)
        samples = [s for r in out if isinstance(r, Learned) for s in r.samples]
        self.rows.taught(key, self.offset, samples)
        self.offset += 1

    def end_batch(self) -> list[str]:
        self.rows.flush()
        gone = self.core.take_gone()
        if gone:
            self.rows.prune(gone, self.offset - 1)
        return gone

    def history(self) -> dict[tuple[str, str], list[float]]:
        learned = self.core.decider.engine.history
        return learned.samples()


def rebuilt(table: dict[str, Any]) -> Partition:
    again = Partition(table)
    for entry in again.rows.replay():
        if entry.samples:
            again.core.decider.learn(Learned(entry.offset, P, entry.samples))
        else:
            again.core.feed(entry.raw.encode(), entry.at)
    return again


def keys_in(table: dict[str, Any]) -> set[str]:
    return {e[2] for name, rows in table.items() if "|0" in name for e in rows}


def test_a_deleted_pods_rows_go_once_its_grace_passed_and_what_it_taught_stays() -> None:
    table: dict[str, Any] = {}
    live = Partition(table)
    for doc in life(GONE, "uid-gone", 0.0, deleted=True):
        live.take(orjson.dumps(doc), f"llm/{GONE}")
    assert live.end_batch() == []
    for doc in life(ALIVE, "uid-live", 100.0, deleted=False):
        live.take(orjson.dumps(doc), f"llm/{ALIVE}")
    live.take(tick_record(T0 + 300.0), "\x00tick")
    assert live.end_batch() == [], "within its grace the deleted pod stays"
    assert keys_in(table) == {f"llm/{GONE}", f"llm/{ALIVE}"}
    learned_before = live.history()
    assert learned_before, "the stream must finish cold starts"

    live.take(tick_record(T0 + 160.0 + FORGET_AFTER_S + 200.0), "\x00tick")
    assert live.end_batch() == [f"llm/{GONE}"]
    assert keys_in(table) == {f"llm/{ALIVE}"}, "the deleted pod's records must leave the table"
    assert any("|L" in name for name in table), "what it taught is kept"

    again = rebuilt(table)
    assert again.history() == live.history() == learned_before
    assert again.core.decider.tracker.current("llm", GONE) is None
    assert again.core.decider.tracker.current("llm", ALIVE) is not None


def test_a_rebuilt_partition_learns_at_the_places_the_live_one_did() -> None:
    """What a rebuild sends again (the worker's `rebuild`: the records fed with their
    places) is stamped as the dead worker stamped it, so the guard hears it once
    (`GuardCore`, tests/streams/test_cores.py)."""
    table: dict[str, Any] = {}
    live = Partition(table)
    for doc in life(ALIVE, "uid-live", 100.0, deleted=False):
        live.take(orjson.dumps(doc), f"llm/{ALIVE}")
    live.end_batch()
    again = Partition(table)
    resent = [
        r
        for e in again.rows.replay()
        for r in again.core.feed(e.raw.encode(), e.at, (e.offset, e.index))
        if isinstance(r, Learned)
    ]
    assert live.learned, "the stream must finish a cold start"
    assert resent == live.learned and all(r.source is not None for r in resent)


def test_a_name_that_lives_on_keeps_its_rows() -> None:
    """A StatefulSet's pod recreated under its name: the old life is forgotten, the name's
    records stay (the new life's are among them) until the new life is forgotten too."""
    table: dict[str, Any] = {}
    live = Partition(table)
    for doc in life(GONE, "uid-first", 0.0, deleted=True):
        live.take(orjson.dumps(doc), f"llm/{GONE}")
    for doc in life(GONE, "uid-second", 200.0, deleted=False):
        live.take(orjson.dumps(doc), f"llm/{GONE}")
    live.take(tick_record(T0 + 160.0 + FORGET_AFTER_S + 200.0), "\x00tick")
    assert live.end_batch() == []
    assert keys_in(table) == {f"llm/{GONE}"}


def test_a_big_batch_is_cut_into_rows_under_the_message_size() -> None:
    table: dict[str, Any] = {}
    rows = PartitionRows(table, P)
    doc = orjson.dumps(pod(ALIVE, "uid-live", watch="ADDED")).decode()
    count = 3 * ROW_BYTES // len(doc)
    for offset in range(count):
        rows.add(offset, doc, f"llm/{ALIVE}")
    assert rows.flush() >= 3
    assert all(len(orjson.dumps(v)) < 2 * ROW_BYTES for v in table.values())
    assert [e.offset for e in rows.replay()] == list(range(count))


def test_an_envelope_is_never_cut_between_rows() -> None:
    """A row is one changelog record: an envelope's documents (one offset) all in one, so a
    worker killed while writing leaves the envelope whole or not at all."""
    table: dict[str, Any] = {}
    rows = PartitionRows(table, P)
    doc = orjson.dumps(pod(ALIVE, "uid-live", watch="ADDED")).decode()
    count = 2 * ROW_BYTES // len(doc)
    for offset in (7, 8):
        for index in range(count):
            rows.add(offset, doc, f"llm/{ALIVE}", None, index)
    rows.flush()
    assert sorted({e[0] for e in row} for row in table.values()) == [{7}, {8}]
    assert [(e.offset, e.index) for e in rows.replay()] == [
        (o, i) for o in (7, 8) for i in range(count)
    ]


def test_a_tick_inside_an_envelope_is_replayed_in_its_place() -> None:
    """The last tick has a row of its own; its index puts it back between the documents
    it came between, or a rebuilt core would move its clock at another moment."""
    table: dict[str, Any] = {}
    live = Partition(table)
    first, then = life(ALIVE, "uid-live", 0.0, deleted=False)[:3], pod(ALIVE, "uid-live")
    docs = [orjson.dumps(d) for d in first] + [tick_record(T0 + 30.0), orjson.dumps(then)]
    for index, raw in enumerate(docs):
        live.core.feed(raw)
        key = "\x00tick" if raw.startswith(b'{"remediator"') else f"llm/{ALIVE}"
        live.rows.add(5, raw.decode(), key, None, index)
    live.rows.flush()
    assert [e.raw.encode() for e in live.rows.replay()] == docs
    assert rebuilt(table).core.now == live.core.now


def test_pods_forgotten_together_rewrite_their_shared_row_once() -> None:
    """A row is a batch of many pods' records: forgetting several of them writes it once
    (each write is a changelog record as big as the row)."""
    table: dict[str, Any] = {}
    rows = PartitionRows(table, P)
    names = [f"vllm-70b-7c9d5b6f4-gone{i}" for i in range(3)] + [ALIVE]
    for offset, name in enumerate(names):
        rows.add(offset, orjson.dumps(pod(name, f"uid-{name}")).decode(), f"llm/{name}")
    rows.flush()
    written: list[str] = []

    class Watched(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            written.append(key)
            super().__setitem__(key, value)

    rows.table = Watched(table)
    assert rows.prune([f"llm/{n}" for n in names[:3]], 9) == 1
    assert written == [f"{P}|{0:012d}"]
    assert keys_in(rows.table) == {f"llm/{ALIVE}"}


def test_feedback_taken_in_process_is_a_row_after_the_documents_it_followed() -> None:
    """Feedback a worker applied in process after the envelope at an offset is kept at
    that offset, past the envelope's documents: its own row, fed in that place again."""
    table: dict[str, Any] = {}
    rows = PartitionRows(table, P)
    for index, name in enumerate(["a", "b"]):  # an envelope of two documents at offset 5
        rows.add(5, orjson.dumps(pod(name, f"uid-{name}")).decode(), f"llm/{name}", None, index)
    rows.flush()
    rows.add(5, '{"remediator":"feedback","records":[]}', "\x00feedback", None, 2)
    rows.flush()
    rows.add(6, orjson.dumps(pod("c", "uid-c")).decode(), "llm/c")
    rows.flush()
    assert sorted(table) == [f"{P}|{5:012d}", f"{P}|{5:012d}.000002", f"{P}|{6:012d}"]
    again = PartitionRows(dict(table), P).replay()
    assert [(e.offset, e.index, e.key) for e in again] == [
        (5, 0, "llm/a"), (5, 1, "llm/b"), (5, 2, "\x00feedback"), (6, 0, "llm/c")
    ]  # fmt: skip
