"""The core as the Kafka runtime runs it: per input partition, then once for the cluster.

Pure: no Faust, no sockets, no clock. The Faust app (`streams.app`) moves records
between topics and tables; everything it decides is decided here, by the core's public
pieces (`remediator.core`): a `Decider` per input partition, one `Guard` for the cluster,
the records of `contract.records` between them, written by `contract.codec`.

    inputs topic (N partitions, by pod) ── PartitionCore ──▶ candidates topic (1 partition)
         ▲                                                             │
         └── feedback (GotThrough, RetryAt) ◀── GuardCore (by time) ◀──┘──▶ commands topic

A partition's clock is serve's (`runtime.clock.ClusterTime`, issue 18): each record
carries the cluster's time the ingest took it at (the newest API-server stamp it saw on
any partition, `keys.arrived`) and is applied then; a kubelet's, an alert's or a
webhook's own time never moves it. Tick records the ingest (or a worker) sends to every
partition move it between inputs. After a tick
the partition reports a watermark: every candidate it will ever emit at or before
that time has been emitted. The guard releases candidates in time order up to the
smallest watermark of all partitions, so the cluster-wide guardrails (rate limit,
blast radius, cooldown per workload) see decisions in the same order as one
embedded process would, however the partitions are spread over workers. Whatever the
guard lets through (acted or dry run) goes back to its partition as `GotThrough`: the
kill-loop guard remembers the deletion there, as `Session` does in one process.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import msgspec
import orjson

from remediator.contract.codec import Wire, decode, decode_wire, encode
from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import (
    Admitted,
    Aging,
    Candidate,
    Envelope,
    Feedback,
    GotThrough,
    HeldBehind,
    Learned,
    Packed,
    RetryAt,
    Settled,
    Watermark,
)
from remediator.core.decider import Decider, TimelineMetrics
from remediator.core.guard import ClusterHistory, Guard, Verdicts
from remediator.inputs.decode import decode as decode_input
from remediator.inputs.records import Input, InputError, Relisted, WorkloadSeen
from remediator.inputs.stamps import api_server_time
from remediator.policy_file import PolicyFile
from remediator.streams.keys import BROADCAST, owner, owner_key
from remediator.streams.pods import FEEDBACK_KEY as FEEDBACK_KEY
from remediator.streams.pods import LEARNED_KEY, Sample

__all__ = [
    "FORGET_AFTER_S",
    "INTERNAL",
    "ENVELOPE",
    "MARKS",
    "Candidate",
    "GuardCore",
    "AdmittedRecord",
    "GuardRecord",
    "Learned",
    "PartitionCore",
    "Released",
    "Watermark",
    "envelope",
    "feedback_batch",
    "feedback_record",
    "guard_batch",
    "parse_guard_record",
    "parse_guard_records",
    "relisted_record",
    "tick_record",
    "unpack",
]

# A deleted pod's timeline is kept this long (stream time), then forgotten, and its
# records leave the table: the embedded runtime's `forget_after_s`.
FORGET_AFTER_S = 600.0

# The ingest says how its watch stands every second or so (`tick_record`'s `watch`); a
# partition that has heard nothing from it for this long (stream time) holds pod deletions.
WATCH_SILENT_S = 10.0
NO_WORD = "no word yet from the ingest's watch"

# The guard's row of its clock and every partition's watermark: one write per batch
# that moved any of them (a row each was a write per partition).
MARKS = "marks"

# Internal records share the input topic with raw documents; they start with this.
INTERNAL = b'{"remediator":'
_FEEDBACK = b'{"remediator":"feedback","record":'
_FEEDBACKS = b'{"remediator":"feedback","records":'


# An input-topic record that is an envelope of documents (the ingest's, `Envelope`).
ENVELOPE = b'{"remediator":"inputs",'


def envelope(records: Sequence[Packed]) -> bytes:
    """Documents for one partition as one input-topic record, in order."""
    return encode(Envelope(list(records)))


def unpack(raw: bytes) -> list[Packed]:
    """An envelope's documents, in order (InputError: not an envelope we can read)."""
    try:
        return decode(raw, Envelope).records
    except msgspec.DecodeError as exc:  # ValidationError is one
        raise InputError(f"an envelope that does not decode: {exc}") from None


def tick_record(at: float, watch: str | None = None) -> bytes:
    """Move a partition's clock to `at`. `watch`: the ingest's word on its watch as of
    `at` (why its picture may lag the API server's, "" when current; None: no word)."""
    if watch is None:
        return orjson.dumps({"remediator": "tick", "at": at})
    return orjson.dumps({"remediator": "tick", "at": at, "watch": watch})


_RELISTED = b'{"remediator":"relisted","record":'


def relisted_record(item: Relisted) -> bytes:
    """A watch's list is complete (`Relisted`): what it did not hold is gone. The ingest
    sends each partition the UIDs of what it sent that partition."""
    return _RELISTED + encode(item) + b"}"


def feedback_record(record: Feedback | Learned) -> bytes:
    """What the guard tells the partitions: got through, look again then, or what another
    partition learned."""
    return _FEEDBACK + encode(record) + b"}"


def feedback_batch(records: Sequence[Feedback | Learned]) -> bytes:
    """Several feedback records for one partition in one input-topic record, in order:
    what a guard batch tells that partition."""
    return _FEEDBACKS + encode(list(records)) + b"}"


def feedback_records(raw: bytes) -> list[Feedback | Learned]:
    """The records of a `feedback_batch`, in order."""
    return decode(raw[len(_FEEDBACKS) : -1], list[Feedback | Learned])


def feedback_runs(records: Sequence[Feedback | Learned]) -> list[tuple[str, bytes]]:
    """What a guard batch tells one partition, in order, cut where the key changes: a "not
    yet" for a pod under the pod's own key (`namespace/name`, as its inputs), so its rows
    leave the `pods` table with the pod once it is forgotten (a retry for a pod the core no
    longer holds does nothing when fed again); cold starts learned elsewhere under
    `LEARNED_KEY`, so their rows can be folded; the rest under `FEEDBACK_KEY`."""
    runs: list[tuple[str, list[Feedback | Learned]]] = []
    for record in records:
        key = _feedback_key(record)
        if runs and runs[-1][0] == key:
            runs[-1][1].append(record)
        else:
            runs.append((key, [record]))
    return [(key, feedback_batch(run)) for key, run in runs]


def feedback_value(runs: list[tuple[str, bytes]]) -> bytes:
    """The runs as one input-topic record for a worker that holds the partition: the batch
    itself when it is one run under `FEEDBACK_KEY` (as before runs), else an envelope of
    the runs, each a document under its key, in order."""
    if len(runs) == 1 and runs[0][0] == FEEDBACK_KEY:
        return runs[0][1]
    return envelope([Packed(key, None, msgspec.Raw(value)) for key, value in runs])


def _feedback_key(record: Feedback | Learned) -> str:
    if isinstance(record, RetryAt) and record.decision.uid and record.decision.namespace:
        return f"{record.decision.namespace}/{record.decision.target}"
    return LEARNED_KEY if isinstance(record, Learned) else FEEDBACK_KEY


def learned_samples(raw: str) -> list[Sample]:
    """The cold starts a run under `LEARNED_KEY` carries, in order."""
    return [s for r in feedback_records(raw.encode()) if isinstance(r, Learned) for s in r.samples]


def thin_feedback(raws: Sequence[str]) -> list[str | None]:
    """Feedback kept under `FEEDBACK_KEY` from before any pod record a partition still
    holds, in the order a rebuild feeds it, thinned to what that rebuild needs: a pod
    deletion leaves only its workload's kill-loop memory there (`Decider.remembers`),
    which a later deletion of the same key overwrites, so only the last of each is kept.
    Each raw as it was, thinner, or None (nothing left)."""
    batches = [feedback_records(raw.encode()) for raw in raws]
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for i, records in enumerate(batches):
        for j, record in enumerate(records):
            if isinstance(record, GotThrough):
                key = Decider.remembers(record)
                if isinstance(key, tuple):
                    last[key] = (i, j)

    def kept(i: int, j: int, record: Feedback | Learned) -> bool:
        if not isinstance(record, GotThrough):
            return True
        key = Decider.remembers(record)
        return key if isinstance(key, bool) else last[key] == (i, j)

    out: list[str | None] = []
    for i, (raw, records) in enumerate(zip(raws, batches, strict=True)):
        rest = [r for j, r in enumerate(records) if kept(i, j, r)]
        out.append(raw if len(rest) == len(records) else
                   feedback_batch(rest).decode() if rest else None)  # fmt: skip
    return out


def thin_broadcast(raws: Sequence[str]) -> list[str | None]:
    """Broadcast documents from before any pod record a partition still holds, in order,
    thinned to what a rebuild needs: a workload is known by its last document (the decider
    keeps the last seen; a Deployment's status moves with every pod of it that starts), so
    of each workload's documents only the last stays. A node's verdicts stay whole."""
    keys = [_workload_of(raw) for raw in raws]
    last = {key: i for i, key in enumerate(keys) if key is not None}
    return [raw if key is None or last[key] == i else None
            for i, (raw, key) in enumerate(zip(raws, keys, strict=True))]  # fmt: skip


def _workload_of(raw: str) -> str | None:
    try:
        inputs = decode_input(raw.encode())
    except InputError:
        return None
    if len(inputs) == 1 and isinstance(inputs[0], WorkloadSeen):
        return owner_key(inputs[0])
    return None


def judged_key(key: str) -> bool:
    """Whether records under a partition key are a pod's, judged by the learned history:
    not a workload's or node's (broadcast), a node's or a pod-less alert's, or a
    partition's own (ticks, feedback)."""
    return not (key == BROADCAST or key.startswith(("\x00", "node/", "alert/")))


# A candidates-topic record; `Settled` only where the guard is split (streams/tiers.py).
GuardRecord = Candidate | Learned | Watermark | Settled
# An admitted-topic record: the guard's second tier's (streams/tiers.py).
AdmittedRecord = Admitted | Learned | Watermark
_KINDS = {"candidates": (Candidate, Learned, Watermark, Settled),
          "admitted": (Admitted, Learned, Watermark)}  # fmt: skip


def parse_guard_record(raw: bytes, topic: str = "candidates") -> Any:
    return parse_guard_records(raw, topic)[0]


def guard_batch(records: Sequence[GuardRecord | AdmittedRecord]) -> bytes:
    """What a partition's batch of inputs sends the guard, as one candidates-topic record
    (a JSON array, in order): one record per batch, not one per candidate. (And what a
    first tier sends the second, on the admitted topic.)"""
    return encode(list(records))


def parse_guard_records(raw: bytes, topic: str = "candidates") -> list[Any]:
    """A candidates-topic (or `topic`'s) record: a batch (`guard_batch`) or a single one."""
    records = decode(raw, list[Wire]) if raw.startswith(b"[") else [decode_wire(raw)]
    for record in records:
        if not isinstance(record, _KINDS[topic]):
            raise ValueError(f"not a record of the {topic} topic: {type(record).__name__}")
    return records


class _Collect:
    """The decider's sink: candidates go out, guarding happens downstream."""

    def __init__(self) -> None:
        self.out: list[Candidate] = []
        self.dropped = 0

    def transition(self, change: object) -> None:
        pass

    def ignored(self, ignored: object) -> None:
        self.dropped += 1

    def candidate(self, candidate: Candidate) -> None:
        self.out.append(candidate)


class PartitionCore:
    """Timelines, incidents and timers of the pods of one input partition: a decider.
    `metrics`: the worker's timeline metrics (every partition of a worker observes into
    one set, exported on its /metrics), else its own on `registry`.

    Behind: the ingest that runs the watch says, in its ticks, whether its picture may lag
    the API server's (`tick_record`'s `watch`). Every candidate carries the partition's
    `behind` as it was made, and the guard holds pod deletions on it, as serve holds on
    its watch's word; once caught up the held pods are looked at again at once. Silence
    for `watch_silent_s` (an ingest dead or paused: its watch brings no news, a pod's
    Ready included) is behind too. `watched`: True, the ingest's word is required from the
    start; None, once heard (an ingest without a watch says nothing: nothing held);
    False, ignored."""

    def __init__(
        self,
        config: PolicyFile,
        partition: int,
        partitions: int,
        registry: Any = None,
        metrics: TimelineMetrics | None = None,
        forget_after_s: float = FORGET_AFTER_S,
        watched: bool | None = None,
        watch_silent_s: float = WATCH_SILENT_S,
    ) -> None:
        self.partition = partition
        self.partitions = partitions
        self.decider = Decider(config, registry, metrics=metrics, keep_learned=True)
        self.ignored = 0
        self.forget_after_s = forget_after_s
        self.watched = watched
        self.watch_silent_s = watch_silent_s
        self._word: tuple[str, float] | None = None  # the ingest's last: (why, its time)
        self.behind = NO_WORD if watched else ""
        # The partition keys (namespace/name) of deleted pods forgotten since the last
        # `take_gone`: their records may leave the table.
        self.gone: list[str] = []

    def take_gone(self) -> list[str]:
        gone, self.gone = self.gone, []
        return gone

    @property
    def now(self) -> float:
        return self.decider.now

    def feed(
        self, raw: bytes, arrived: float | None = None, source: tuple[int, int] | None = None
    ) -> list[Candidate | Learned]:
        """One record of the input topic: a raw document or an internal record.
        `arrived`: the cluster's time the ingest took it at (`keys.arrived`); `source`:
        its place in the partition (offset, place at it), stamped on what it taught."""
        sink = _Collect()
        if raw.startswith(_RELISTED):
            self._relisted(raw, sink, arrived)
        elif raw.startswith(INTERNAL):
            self._internal(raw, sink)
        else:
            for item in decode_input(raw):
                mine = self._owns(item)
                before = len(sink.out)  # (moved past the timers for a broadcast input)
                # serve's clock rule (runtime.clock.ClusterTime): only the API server's
                # stamps move the clock (the newest the ingest saw, on any partition),
                # never a kubelet's, an alert's or a webhook's own time.
                stamp = api_server_time(item)
                now = max(self.decider.now, -math.inf if stamp is None else stamp,
                          -math.inf if arrived is None else arrived)  # fmt: skip
                if not mine:
                    # A broadcast input: its own decision is another's to make, but the
                    # timers that fire on the way to its time are this partition's pods'.
                    self.decider.advance(now, sink, sink.candidate)
                    before = len(sink.out)
                self.decider.feed(item, sink, sink.candidate, now=now)
                if not mine:
                    del sink.out[before:]
        self._judge_behind(sink)
        self.ignored += sink.dropped
        out: list[Candidate | Learned] = []
        learned, engine = self.decider.learned(), self.decider.engine
        gpus = engine.take_gpu_news() if engine.has_gpu_news else None
        if learned or gpus:
            out.append(Learned(self.decider.now, self.partition, learned, gpus, source))
        p, behind = self.partition, self.behind
        for c in sink.out:
            out.append(Candidate(c.decision, c.at, p, c.model, c.phase, c.once, behind))
        return out

    def _relisted(self, raw: bytes, sink: _Collect, arrived: float | None) -> None:
        try:
            item = decode(raw[len(_RELISTED) : -1], Relisted)
        except msgspec.DecodeError as exc:
            raise InputError(f"a complete list that does not decode: {exc}") from None
        stamp = api_server_time(item)
        now = max(self.decider.now, -math.inf if stamp is None else stamp,
                  -math.inf if arrived is None else arrived)  # fmt: skip
        self.decider.feed(item, sink, sink.candidate, now=now)

    # ---- behind: the ingest's word on its watch ------------------------------------------
    def _heard(self, doc: dict[str, Any], at: float) -> None:
        word = doc.get("watch")
        if isinstance(word, str) and self.watched is not False:
            self._word = (word, at)

    def _judge_behind(self, sink: _Collect) -> None:
        """The partition's `behind` now; caught up: the pods held meanwhile looked at again."""
        was, self.behind = self.behind, self._behind_now()
        if was and not self.behind:
            self.decider.caught_up(sink, sink.candidate)

    def _behind_now(self) -> str:
        if self._word is None:
            return NO_WORD if self.watched else ""
        why, at = self._word
        silent = self.decider.now - at
        if silent > self.watch_silent_s:
            return f"no word from the ingest's watch for {silent:.0f}s"
        return why

    def _owns(self, item: Input) -> bool:
        """Whether this partition decides for `item`: any but a broadcast kind's, which one
        partition decides for (`inputs.kinds.owner_key`)."""
        key = owner_key(item)
        return key is None or owner(key, self.partitions) == self.partition

    def _internal(self, raw: bytes, sink: _Collect) -> None:
        if raw.startswith(_FEEDBACKS):
            for record in feedback_records(raw):
                self._feedback(record, sink)
            return
        if raw.startswith(_FEEDBACK):
            self._feedback(decode_wire(raw[len(_FEEDBACK) : -1]), sink)
            return
        doc = orjson.loads(raw)
        at = float(doc["at"])
        if doc["remediator"] == "retry":  # a table written before feedback records
            decision = decode(doc["decision"], Decision)
            retry = RetryAt(decision, at, float(doc.get("not_before", at)))
            self.decider.look_again(retry, sink, sink.candidate)
            return
        self._heard(doc, at)
        self.decider.advance(at, sink, sink.candidate)
        # As the embedded runtime does on its ticks: deleted pods leave memory after a grace.
        tracker = self.decider.tracker
        for namespace, name in self.decider.prune(self.forget_after_s):
            if tracker.current(namespace, name) is None:  # else the name lives on: kept
                self.gone.append(f"{namespace}/{name}")

    def _feedback(self, record: object, sink: _Collect) -> None:
        if isinstance(record, GotThrough):
            self.decider.feedback(record)
        elif isinstance(record, HeldBehind):
            self.decider.feedback(record)
            if not self.behind:  # caught up before the guard's word came back: at once
                self.decider.caught_up(sink, sink.candidate)
        elif isinstance(record, RetryAt):
            # Its due time may be behind this partition's clock already: fired now.
            self.decider.look_again(record, sink, sink.candidate)
        elif isinstance(record, Learned) and record.partition != self.partition:
            self.decider.learn(record)  # its own it learned when it happened


def _learned_row(key: str) -> str:
    """The guard table's row of a learned key ("<model>\n<phase>"): its model's."""
    return "learned|" + key.split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class Released:
    """What the guardrails said of a candidate, the partition it came from, and the
    feedback that goes back (None: nothing to remember). A `Learned` record is released
    with no result: it goes back to every other partition, so each judges budgets by the
    cluster's history, as one process does."""

    result: Decision | Suppressed | None
    origin: int
    feedback: Feedback | Learned | None
    # For the guard's other tier (streams/tiers.py): what the first tier let on, the hedge
    # budget's news it forwards, or the second tier's answer. None: nothing.
    onward: Admitted | Settled | Learned | None = None


@dataclass
class GuardCore:
    """The cluster-wide guardrails over candidates from every partition, in time order:
    the core's `Guard`, a heap of candidates waiting for the watermark, and the
    cluster-wide history of cold starts (each partition learns from its own pods only)
    by which each decision's expected cold start is weighed, as one process would.

    Its table is kept per key (`changed`): the guard state when it changed, the marks
    (clock, watermarks, how far it read), a model's learned samples; never the whole
    per record. A waiting candidate taken from the candidates topic at an offset
    (`take(record, offset)`) gets no row: the topic keeps it, and a guard restored from
    its rows reads the topic again from the oldest record that still has one waiting
    (`replay_from`), taking again from the records it had taken only what was still
    waiting then (a candidate later than the frontier it had reached: everything up
    to the frontier was released). A candidate taken with no offset (tests, an older
    worker's rows) is a row of its own (`pending|<seq>`, deleted once released).
    (Every waiting candidate was a row, written and deleted: a third of a worker's
    records.)"""

    config: PolicyFile
    partitions: int
    verdicts: Verdicts | None = None
    # (at, 0 = learned | 1 = candidate, seq, the record's bytes), a heap
    pending: list[tuple[float, int, int, bytes]] = field(default_factory=list)
    watermarks: dict[int, float] = field(default_factory=dict)
    clock: float = -math.inf  # the latest time the guardrails judged at; never goes back
    learned: dict[str, list[float]] = field(default_factory=dict)
    # incident -> when: the notices told once for the cluster (`Candidate.once`). Two
    # partitions may hold pods of one workload in one tick, before either hears of the
    # other's notice; one process tells it once, so the guard lets one through.
    told: dict[str, float] = field(default_factory=dict)
    # partition -> the latest place (`Learned.source`) heard from it: a rebuilt partition's
    # second sending of what it learned is heard once (history, hedge budget, relay).
    heard: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.guard = Guard(self.config.guardrails, verdicts=self.verdicts, keeps_rows=True)
        self.history = ClusterHistory(self.config.rules, self.learned)
        self.learned = self.history.learned
        # seq -> its pending entry; new seqs come after every restored one (ties by seq)
        self._waiting = {entry[2]: entry for entry in self.pending}
        self._seq = max(self._waiting, default=0)
        self._dirty: set[str] = {"state", MARKS} | {f"pending|{s}" for s in self._waiting}
        # seq -> the candidates-topic offset of its record (entries with no row)
        self._origin: dict[int, int] = {}
        self.taken = -1  # the highest candidates-topic offset ever taken
        self.read = 0  # the next offset to take: the records before it were taken
        # Restored: the records up to `replayed_to` were taken before; of them only what
        # was later than `replay_frontier` was still waiting (everything else released).
        self.replayed_to = -1
        self.replay_frontier = -math.inf
        self._behind: str | None = None  # the hold last set (None: not yet this run)
        self._switch: tuple[bool, str] | None = None  # the kill switch last set, this run

    @property
    def state(self) -> Any:
        return self.guard.state

    @property
    def foreign(self) -> tuple[str, ...]:
        """Records of guardrails this release does not have, in the guard state it was
        restored with (`FOREIGN_RECORDS`)."""
        return tuple(self.guard.state.foreign)

    @property
    def frontier(self) -> float:
        """Every partition has emitted all its candidates up to this time."""
        if len(self.watermarks) < self.partitions:
            return -math.inf
        return min(self.watermarks.values())

    @property
    def replay_from(self) -> int:
        """The candidates-topic offset a restored guard reads again from: the oldest
        record with a candidate still waiting, else the next one to take."""
        return min(self.read, min(self._origin.values(), default=self.read))

    def set_kill_switch(self, engaged: bool, note: str) -> None:
        """What the kill-switch file says (`streams.kill_switch`): the guard's kill_switch
        stage holds every decision while it is on. A change is a guard-state row."""
        if (engaged, note) != self._switch:
            self._switch = (engaged, note)
            self.guard.set_kill_switch(engaged, note)
            self._dirty.add("state")

    def missed_before(self, offset: int) -> int | None:
        """Given the record at `offset`, the offset to read the topic again from first
        (None: nothing missed). A restored guard reads again from `replay_from`; a record
        never given it (dropped around a rebalance) is read the same way. A guard that
        never read (a new group, an older worker's rows) starts where it is started."""
        return self.read if self.taken >= 0 and offset > self.read else None

    def take(self, record: GuardRecord | AdmittedRecord, offset: int = -1) -> list[Released]:
        """A record from the candidates topic (at `offset`; -1: none to read again
        from); what the guardrails said, oldest first."""
        self._mark_read(offset)
        out: list[Released] = []
        if isinstance(record, Settled):
            out = self._settled(record)
        elif isinstance(record, Watermark):
            if record.at > self.watermarks.get(record.partition, -math.inf):
                self.watermarks[record.partition] = record.at
                self._dirty.add(MARKS)
        elif not self._released_before(record, offset):
            # A learned record goes before the candidates of its instant: the pod was
            # ready when they were made.
            kind = 0 if isinstance(record, Learned) else 1
            self._seq += 1
            entry = (record.at, kind, self._seq, encode(record))
            heapq.heappush(self.pending, entry)
            self._waiting[self._seq] = entry
            if offset >= 0:
                self._origin[self._seq] = offset  # the topic keeps it: no row
            else:
                self._dirty.add(f"pending|{self._seq}")
        return out + self._release()

    def take_batch(
        self, records: Sequence[GuardRecord | AdmittedRecord], offset: int = -1
    ) -> list[Released]:
        """A topic record's records, all at `offset`: nothing where that offset was taken
        already (passed to it in process before the topic gave it, or taken before a
        restore and released then)."""
        if self.has_taken(offset):
            return []
        return [one for record in records for one in self.take(record, offset)]

    def has_taken(self, offset: int) -> bool:
        """Whether the record at this offset of its topic was taken (-1: none)."""
        return 0 <= offset < self.read

    def _mark_read(self, offset: int) -> None:
        if offset >= 0:
            self._dirty.add(MARKS)
            self.read = offset + 1
            self.taken = max(self.taken, offset)

    def _released_before(self, record: Candidate | AdmittedRecord, offset: int) -> bool:
        """Taken before the restore and released then (everything up to the frontier it
        had reached was): judged once."""
        return 0 <= offset <= self.replayed_to and record.at <= self.replay_frontier

    def _release(self) -> list[Released]:
        frontier = self.frontier
        out: list[Released] = []
        while self.pending and self.pending[0][0] <= frontier:
            at, _, seq, raw = heapq.heappop(self.pending)
            del self._waiting[seq]
            if self._origin.pop(seq, None) is None:
                self._dirty.add(f"pending|{seq}")  # its row goes
            else:
                self._dirty.add(MARKS)  # where to read again from may move
            record = decode_wire(raw)
            if isinstance(record, Learned):
                if not self._heard_before(record):  # else sent again by its partition
                    out.extend(self._learn(record, at))
                continue
            out.extend(self._judge(record, at))
        return out

    def _settled(self, settled: Settled) -> list[Released]:
        """The second tier's word: for a first tier alone (streams/tiers.py)."""
        raise ValueError("a settled record, but this guard is not split by workload")

    def _learn(self, record: Learned, at: float) -> list[Released]:
        """A partition's finished cold starts, in time order: the cluster's history, the
        hedge budget's news, relayed to every other partition, held pods looked at again."""
        self._history(record)
        if record.gpus is not None:  # hedges are weighed by every partition's
            self.guard.hear(record.gpus, at)
            self._dirty.add("state")
            record = msgspec.structs.replace(record, gpus=None)  # the guard's alone
        return [Released(None, record.partition, record), *self._reweigh(record)]

    def _history(self, record: Learned) -> None:
        for key in self.history.learn(record.samples):
            self._dirty.add(_learned_row(key))

    def _judge(self, record: Wire, at: float) -> list[Released]:
        """A candidate, at the guard's clock: both tiers of the guardrails, its cold start
        weighed by the cluster's history."""
        assert isinstance(record, Candidate)
        if record.once and record.decision.incident in self.told:
            return []  # told already, by another partition: as if never said
        self._advance(at)
        if record.behind != self._behind:  # the partition's word as it decided
            self.guard.set_behind(record.behind or None)
            self._behind = record.behind
        before = self.guard.state
        result, feedback = self.guard.judge(self.history.weigh(record), self.clock)
        self._touched(before)
        if record.once and isinstance(feedback, GotThrough):
            self._tell(record.decision.incident)
        return [Released(result, record.partition, feedback)]

    def _advance(self, at: float) -> None:
        """A late candidate (a retry back after its partition ran ahead) is judged now, not
        in the past the guard state has already moved beyond."""
        if at > self.clock:
            self.clock = at
            self._dirty.add(MARKS)

    def _tell(self, incident: str) -> None:
        self.told[incident] = self.clock
        self._dirty.add(f"told|{incident}")

    def _touched(self, before: object) -> None:
        if self.guard.state is not before:
            self._dirty.add("state")

    def _heard_before(self, learned: Learned) -> bool:
        """Whether the guard heard what `learned` says already: a place in its partition
        no later than the latest heard from there. (Released in time order, a partition's
        records come in their own order: a dead worker's record and its rebuilt
        partition's copy of it are one place.)"""
        if learned.source is None:  # (an older worker's: not told apart)
            return False
        place = (int(learned.source[0]), int(learned.source[1]))
        last = self.heard.get(learned.partition)
        if last is not None and place <= last:
            return True
        self.heard[learned.partition] = place
        self._dirty.add(MARKS)
        return False

    def _reweigh(self, learned: Learned) -> list[Released]:
        """Pods held until as old as their model's expected cold start, looked at sooner
        where these cold starts brought the estimate down (as `Session` does the moment
        it learns them): a `sooner` RetryAt to each pod's own partition."""
        models = {model for model, phase, _ in learned.samples if phase == "total"}
        if not models or not self.guard.aging:
            return []
        retries = self.guard.reweigh(models, learned.at, self.history.expected)
        return [Released(None, retry.partition, retry) for retry in retries]

    # ---- the table, per key -------------------------------------------------------------
    def changed(self) -> dict[str, Any]:
        """The table rows changed since the last call: key -> JSON-able value (None:
        the row goes)."""
        rows: dict[str, Any] = {}
        for key in self._dirty:
            if key == "state":
                rows[key] = self.guard.state.to_json()
            elif key.startswith("pending|"):
                entry = self._waiting.get(int(key.split("|", 1)[1]))
                rows[key] = None if entry is None else [*entry[:3], entry[3].decode()]
            elif key == "pending":
                rows[key] = None  # an older worker's one row: now one per candidate
            elif key == MARKS:
                clock = self.clock if math.isfinite(self.clock) else None
                marks = {str(p): at for p, at in sorted(self.watermarks.items())}
                rows[key] = {"clock": clock, "watermarks": marks, "taken": self.taken,
                             "from": self.replay_from}  # fmt: skip
                if self.heard:
                    rows[key]["heard"] = {str(p): list(s) for p, s in sorted(self.heard.items())}
            elif key.startswith("learned|"):
                rows[key] = self._learned_of(key.split("|", 1)[1])
            elif key == "clock" or key.startswith("watermark|"):
                rows[key] = None  # an older worker's rows: now in MARKS, and per model
            elif key.startswith("told|"):
                rows[key] = self.told[key.split("|", 1)[1]]
        self._dirty.clear()
        for uid, aging in self.guard.take_aging_changed().items():
            rows[f"aging|{uid}"] = None if aging is None else encode(aging).decode()
        return rows

    def _learned_of(self, model: str) -> dict[str, list[float]] | None:
        """A model's row: its phases' learned samples (None: an older per-phase row, now
        in its model's)."""
        if "\n" in model:
            return None
        prefix = model + "\n"
        phases = {k[len(prefix) :]: v for k, v in self.learned.items() if k.startswith(prefix)}
        return phases or None

    @classmethod
    def from_rows(
        cls,
        config: PolicyFile,
        partitions: int,
        rows: dict[str, Any],
        verdicts: Verdicts | None = None,
    ) -> Self:
        learned: dict[str, list[float]] = {}
        older: set[str] = set()  # an older worker's rows, written again in today's shape
        for k, v in rows.items():
            if not k.startswith("learned|") or v is None:
                continue
            if isinstance(v, dict):  # a model's row: phase -> samples
                model = k.split("|", 1)[1]
                learned |= {f"{model}\n{ph}": [float(x) for x in xs] for ph, xs in v.items()}
            else:  # an older worker's row per model and phase
                learned[k.split("|", 1)[1]] = [float(x) for x in v]
                older |= {k, _learned_row(k.split("|", 1)[1])}
        waiting = list(rows.get("pending") or [])  # an older worker's one row
        waiting += [v for k, v in rows.items() if k.startswith("pending|") and v is not None]
        pending = [(float(a), int(k), int(s), str(r).encode()) for a, k, s, r in waiting]
        heapq.heapify(pending)
        told = {k.split("|", 1)[1]: float(v) for k, v in rows.items() if k.startswith("told|")}
        core = cls(config, partitions, verdicts, pending=pending, learned=learned, told=told)
        if rows.get("state"):
            core.guard.restore(rows["state"])
        for k, v in rows.items():
            if k.startswith("aging|") and v is not None:
                core.guard.aging[k.split("|", 1)[1]] = decode(v, Aging)
        marks = rows.get(MARKS) or {}
        core.watermarks = {int(p): float(at) for p, at in marks.get("watermarks", {}).items()}
        core.heard = {int(p): (int(o), int(i)) for p, (o, i) in marks.get("heard", {}).items()}
        clock = marks.get("clock")
        core.clock = -math.inf if clock is None else float(clock)
        for k, v in rows.items():  # an older worker's rows: one per watermark, the clock
            if k.startswith("watermark|") and v is not None:
                p = int(k.split("|", 1)[1])
                core.watermarks[p] = max(core.watermarks.get(p, -math.inf), float(v))
                older |= {k, MARKS}
            elif k == "clock":
                core.clock = max(core.clock, -math.inf if v is None else float(v))
                older |= {k, MARKS}
        core.taken = core.replayed_to = int(marks.get("taken", -1))
        core.read = int(marks.get("from", core.taken + 1))
        core.replay_frontier = core.frontier
        core._dirty = older
        if "pending" in rows:  # written again per candidate, the old row deleted
            core._dirty |= {"pending"} | {f"pending|{s}" for s in core._waiting}
        return core

    def to_json(self) -> str:
        """Every row at once (tests, and a first write)."""
        self._dirty |= {"state", MARKS}
        self._dirty |= {f"pending|{s}" for s in self._waiting if s not in self._origin}
        self._dirty |= {_learned_row(k) for k in self.learned}
        self._dirty |= {f"told|{k}" for k in self.told}
        rows = {k: v for k, v in self.changed().items() if v is not None}
        rows |= {f"aging|{uid}": encode(a).decode() for uid, a in self.guard.aging.items()}
        return json.dumps(rows, sort_keys=True)

    @classmethod
    def from_json(cls, config: PolicyFile, partitions: int, text: str) -> Self:
        return cls.from_rows(config, partitions, json.loads(text))
