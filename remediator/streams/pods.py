"""One input partition's rows in the `pods` table: what its core is rebuilt from.

Pure: the table is any `MutableMapping` (a Faust Table in the worker, a dict in tests);
the worker makes the writes under the batch's event (Faust's changelog partition).

    "<p>|<first offset>"  a batch's records: [[offset, record, key, arrived, index], ...]
                          (`arrived`: the cluster's time the ingest took it at, or null;
                          `index`: its place in the envelope at `offset`, 0 if alone)
    "<p>|<offset>.<index>" the guard's feedback, applied in the worker that holds the
                          partition after the documents at `offset` (`index`: past theirs)
    "<p>|\\x00tick"        the partition's last tick: [offset, record, index, arrived]
    "<p>|\\x00tick|<what>" the last record of its kind where only the last matters: the
                          ingest's word on its watch (`WORD`), a watch's last complete
                          list (`relisted_key`: one per kind, namespace and selector)
    "<p>|L<offset>"       cold starts learned from pods since pruned: [[offset, model,
                          phase, seconds], ...], learned at the record at `offset`
    "<p>|<offset>"        (an older worker's row: one record, or [arrived, record])

An envelope (many documents at one offset) is never cut between two rows: a row is one
changelog record, so a worker killed while writing leaves an envelope in the table
whole or not at all, and the offset alone says whether it was applied.

A deleted pod is forgotten by its partition's core `FORGET_AFTER_S` after it ended, as
the embedded runtime forgets it; its records then leave the table (`prune`: the rows
that held them are written again without them, or deleted), so the table is bounded by
the pods alive, not by every pod ever seen. What the pod taught the core that outlives
it is kept: the cold starts it finished (the adaptive budgets learn from them) go to an
`L` row and are learned again, in their place, when the core is rebuilt. The guard's
feedback is kept by what it is about: a pod's "not yet" (`RetryAt`) under the pod's key,
so it goes with the pod (fed again for a pod the core no longer holds, it does nothing);
cold starts learned elsewhere under `LEARNED_KEY`; what got through (the kill-loop memory)
under `FEEDBACK_KEY` (`streams.core.feedback_runs`).

    "<p>|Lfolded"         the learned history folded: {"before": offset, "samples":
                          [[offset, model, phase, seconds], ...]}

A fold (`PartitionRows.fold`) bounds what outlives the pods: of what was learned before the
oldest pod record left, only what can still judge a pod stays (the last `adaptive.window`
samples of each model's phase, the last deletion of each workload's phase, each workload's
last document).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TICK = "\x00tick"  # the table key suffix of a partition's last tick
_TICK_PREFIX = '{"remediator":"tick"'
# Records of which a partition's rows keep only the last, by key (`TICK` + what).
WORD = TICK + "|watch"  # the ingest's ticks that say how its watch stands


def relisted_key(kind: str, namespace: str, selector: str | None) -> str:
    """A watch's complete list: the last one per list tells what is gone."""
    return f"{TICK}|relisted|{kind}|{namespace}|{selector or ''}"


Sample = tuple[str, str, float]  # (model, phase, seconds)
# Records under one key, in order → each as it was, thinner, or None (`PartitionRows.fold`).
Thin = Callable[[list[str]], list[str | None]]
# The row of a partition's learned history folded (`PartitionRows.fold`): {"before": X,
# "parts": n}; its samples, [[offset, model, phase, seconds], ...] in the order they were
# learned, in rows "Lfolded.<X>.<i>" (i < n), each under ROW_BYTES: a cluster of many models
# folds more than one changelog record may hold.
FOLDED = "Lfolded"
# The key the partition's rows keep feedback under when it outlives any one pod (what got
# through: the kill-loop memory), thinned by a fold (`streams.core.thin_feedback`).
FEEDBACK_KEY = "\x00feedback"
# The partition key of cold starts learned in other partitions, relayed by the guard
# (`streams.core.feedback_runs`): kept as feedback until folded.
LEARNED_KEY = "\x00learned"
# The most record bytes in one row: well under Kafka's default message size (1 MB), which a
# batch of 500 pod documents can pass.
ROW_BYTES = 256 * 1024


def _parts(batch: list[list[Any]]) -> Iterator[list[list[Any]]]:
    part: list[list[Any]] = []
    size = 0
    for entry in batch:
        # Cut only between offsets: an envelope's documents stay in one row.
        if part and size + len(entry[1]) > ROW_BYTES and entry[0] != part[-1][0]:
            yield part
            part, size = [], 0
        part.append(entry)
        size += len(entry[1])
    if part:
        yield part


def _sample_rows(samples: list[list[Any]]) -> list[list[list[Any]]]:
    """Samples cut into rows of at most ROW_BYTES (a sample's size: its names and figures)."""
    rows: list[list[list[Any]]] = [[]]
    size = 0
    for sample in samples:
        bytes_ = len(sample[1]) + len(sample[2]) + 48
        if rows[-1] and size + bytes_ > ROW_BYTES:
            rows.append([])
            size = 0
        rows[-1].append(sample)
        size += bytes_
    return rows


@dataclass(frozen=True, slots=True)
class Entry:
    """A record to feed again (`raw`), or cold starts to learn again (`samples`)."""

    offset: int
    raw: str = ""
    key: str = ""
    at: float | None = None  # the cluster's time the ingest took it at
    samples: tuple[Sample, ...] = ()
    index: int = 0  # its place in the envelope at `offset`


@dataclass
class PartitionRows:
    table: MutableMapping[str, Any]
    partition: int
    # partition key -> the rows holding its records; -> what its records taught the core
    where: dict[str, set[str]] = field(default_factory=dict)
    learned: dict[str, list[list[Any]]] = field(default_factory=dict)
    _batch: list[list[Any]] = field(default_factory=list)
    _latest: dict[str, list[Any]] = field(default_factory=dict)  # key -> its last record
    unfolded: int = 0  # records written since the last fold (`StreamsConfig.fold_after`)

    @property
    def prefix(self) -> str:
        return f"{self.partition}|"

    # ---- reading ------------------------------------------------------------------------
    def replay(self) -> list[Entry]:
        """Everything to rebuild the core from, in offset order (and the index of rows)."""
        prefix = self.prefix
        entries: list[Entry] = []
        before, folded = self.folded()
        for name, value in list(self.table.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            if rest.startswith(FOLDED):
                continue
            if rest.startswith(TICK):
                index = int(value[2]) if len(value) > 2 else 0
                at = value[3] if len(value) > 3 else None
                entries.append(Entry(int(value[0]), str(value[1]), rest, at, index=index))
            elif rest.startswith("L"):
                entries.extend(Entry(int(o), samples=((m, ph, float(s)),)) for o, m, ph, s in value)
            elif isinstance(value, list) and value and isinstance(value[0], list):
                for offset, raw, key, at, *index in value:  # (an older row: no index)
                    place = int(index[0]) if index else 0
                    entries.append(Entry(int(offset), raw, key, at, index=place))
                    if key:
                        self.where.setdefault(key, set()).add(name)
            elif isinstance(value, list):  # an older worker's [arrived, record]
                entries.append(Entry(int(rest), str(value[1]), at=value[0]))
            else:
                entries.append(Entry(int(rest), str(value)))
        # What a fold took in and a crash left behind it is read from the fold alone.
        entries = [e for e in entries if e.offset >= before or not _learned(e)]
        self.unfolded = len(entries)  # (a fold soon after a rebuild: it reads them anyway)
        entries[:0] = [Entry(o, samples=((m, ph, float(sec)),)) for o, m, ph, sec in folded]
        entries.sort(key=lambda e: (e.offset, not e.samples, e.index))  # (stable: in order)
        return entries

    def folded(self) -> tuple[int, list[list[Any]]]:
        """The fold's bound (every learned record before it is in the fold) and samples."""
        value = self.table.get(f"{self.prefix}{FOLDED}")
        if not isinstance(value, dict):
            return -1, []
        before = int(value["before"])
        parts = (self.table[self._part(before, i)] for i in range(int(value["parts"])))
        return before, [sample for part in parts for sample in part]

    def _part(self, before: int, i: int) -> str:
        return f"{self.prefix}{FOLDED}.{before}.{i}"

    # ---- writing ------------------------------------------------------------------------
    def add(self, offset: int, raw: str, key: str, at: float | None = None, index: int = 0) -> None:
        """A document the core took (`at`: when it arrived; `index`: its place in the
        envelope at `offset`); written with the batch."""
        if key.startswith(TICK) or raw.startswith(_TICK_PREFIX):
            # Of these only the last matters: a tick, the watch's word, a complete list.
            self._latest[key if key.startswith(TICK) else TICK] = [offset, raw, index, at]
        else:
            self._batch.append([offset, raw, key, at, index])
            self.unfolded += 1

    def taught(self, key: str, offset: int, samples: Iterable[Sample]) -> None:
        """What the record at `offset` (under `key`) taught the core: cold starts."""
        if key:
            self.learned.setdefault(key, []).extend([offset, *s] for s in samples)

    def flush(self) -> int:
        """Write the batch: a row for its records (one per ROW_BYTES of them: a changelog
        record must stay under the broker's message size), the tick row; rows written."""
        written = 0
        for part in _parts(self._batch):
            offset, index = part[0][0], part[0][4]
            # Feedback a worker applied in process after the documents at an offset is
            # kept at that offset, after them: its row is named by both.
            name = f"{self.prefix}{offset:012d}" + (f".{index:06d}" if index else "")
            self.table[name] = part
            for entry in part:
                key = entry[2]
                if key:
                    self.where.setdefault(key, set()).add(name)
            written += 1
        self._batch = []
        for key, last in self._latest.items():
            self.table[f"{self.prefix}{key}"] = last
            written += 1
        self._latest = {}
        return written

    def fold(
        self, window: int, samples_of: Callable[[str], Sequence[Sample]],
        judged: Callable[[str], bool], thin: Mapping[str, Thin],
    ) -> int:  # fmt: skip
        """Fold what no pod of the partition can still be judged by; rows written. A
        rebuild feeds records from the oldest under a judged key (`judged`: a pod's, not a
        workload's or the feedback's), and the history a pod is judged by is the last
        `window` samples of its model's phase: of what was learned before that record,
        only those last `window` can ever be in it; they go to one row. So the history at
        every record a rebuild judges by stays what it was. `samples_of`: the samples of a
        relayed record (under `LEARNED_KEY`); `thin`, by key: the records under it from
        before that record, in order, as a rebuild still needs them (the feedback, the
        workloads)."""
        self.unfolded = 0
        was, learned = self.folded()
        before, learned_rows, batch_rows = self._unfolded(judged, {LEARNED_KEY, *thin})
        if before <= was:
            return 0
        entries: list[tuple[int, bool, int, Sequence[Sample]]] = []
        for name in learned_rows:
            for o, m, ph, sec in self.table[name]:
                if was <= int(o) < before:
                    entries.append((int(o), False, 0, [(m, ph, float(sec))]))
        for name in batch_rows:
            for offset, raw, key, _at, *index in self.table[name]:
                if key == LEARNED_KEY and was <= offset < before:
                    entries.append((offset, True, index[0] if index else 0, samples_of(raw)))
        entries.sort(key=lambda e: e[:3])  # as a rebuild feeds them
        learned.extend([o, *sample] for o, _, _, samples in entries for sample in samples)
        last: dict[tuple[str, str], deque[list[Any]]] = {}
        for sample in learned:
            last.setdefault((sample[1], sample[2]), deque(maxlen=window)).append(sample)
        kept = {id(sample) for samples in last.values() for sample in samples}
        # The fold first, its parts before the row that names them: a worker killed before
        # the rest is written is rebuilt from it (killed before that row, from the last).
        olds = [n for n in self.table if n.startswith(f"{self.prefix}{FOLDED}.")]
        parts = _sample_rows([s for s in learned if id(s) in kept])
        for i, part in enumerate(parts):
            self.table[self._part(before, i)] = part
        self.table[f"{self.prefix}{FOLDED}"] = {"before": before, "parts": len(parts)}
        written = len(parts) + 1
        for name in olds:
            if not name.startswith(self._part(before, 0)[:-1]):  # (another fold's)
                del self.table[name]
                written += 1
        for name in learned_rows:
            written += self._rewrite(name, [e for e in self.table[name] if int(e[0]) >= before])
        thinner = {}
        for key, how in thin.items():
            thinner.update(self._thinned(batch_rows, before, key, how))
        for name in batch_rows:
            rest: list[list[Any]] = []
            for n, e in enumerate(self.table[name]):
                raw = thinner.get((name, n), e[1])
                if raw is not None and not (e[2] == LEARNED_KEY and e[0] < before):
                    rest.append(e if raw is e[1] else [e[0], raw, *e[2:]])
            written += self._rewrite(name, rest)
        return written

    def _thinned(
        self, rows: list[str], before: int, key: str, thin: Thin
    ) -> dict[tuple[str, int], str | None]:
        """The entries under `key` before `before` that `thin` changed: (row, place) → raw."""
        fed = sorted((e[0], e[4] if len(e) > 4 else 0, name, n) for name in rows
                     for n, e in enumerate(self.table[name])
                     if e[2] == key and e[0] < before)  # fmt: skip
        raws = [self.table[name][n][1] for _, _, name, n in fed]
        return {
            (name, n): new
            for (_, _, name, n), raw, new in zip(fed, raws, thin(raws), strict=True)
            if new != raw
        }

    def _unfolded(
        self, judged: Callable[[str], bool], keys: set[str]
    ) -> tuple[int, list[str], list[str]]:
        """The offset of the oldest record under a judged key (past the newest, if none),
        the `L` rows, and the rows holding records under `keys`."""
        oldest, newest = None, -1
        learned_rows: list[str] = []
        batch_rows: list[str] = []
        for name, value in self.table.items():
            rest = name[len(self.prefix) :]
            if not name.startswith(self.prefix) or rest.startswith((FOLDED, TICK)):
                continue
            if rest.startswith("L"):
                learned_rows.append(name)
                continue
            if not (isinstance(value, list) and value and isinstance(value[0], list)):
                offsets = [int(rest)]  # an older worker's row of one record: a pod's, maybe
            else:
                offsets = [e[0] for e in value if judged(e[2])]
                if any(e[2] in keys for e in value):
                    batch_rows.append(name)
                newest = max(newest, value[-1][0])
            if offsets:
                oldest = min(offsets) if oldest is None else min(oldest, *offsets)
        return (newest + 1 if oldest is None else oldest), learned_rows, batch_rows

    def _rewrite(self, name: str, rest: list[list[Any]]) -> int:
        """A row written again with only `rest` (deleted if none: a tombstone)."""
        if rest == self.table[name]:
            return 0
        if rest:
            self.table[name] = rest
        else:
            del self.table[name]
            for names in self.where.values():
                names.discard(name)
        return 1

    def prune(self, keys: Iterable[str], offset: int) -> int:
        """The records of `keys` (pods the core forgot) leave the table; what they taught
        it goes to an `L` row at `offset` (the record being taken). Rows written: each row
        once, however many of the pods it held (a row is a batch: many pods share it)."""
        gone = set(keys)
        names: set[str] = set()
        kept: list[list[Any]] = []
        for key in gone:
            names |= self.where.pop(key, set())
            kept.extend(self.learned.pop(key, ()))
        for name in sorted(names):
            rest = [e for e in self.table[name] if e[2] not in gone]
            if rest:
                self.table[name] = rest
            else:
                del self.table[name]
        written = len(names)
        if kept:
            self.table[f"{self.prefix}L{offset:012d}"] = sorted(kept)
            self.unfolded += len(kept)
            written += 1
        return written


def _learned(entry: Entry) -> bool:
    """A record that only teaches the history: an `L` row's sample, a relayed batch."""
    return bool(entry.samples) or entry.key == LEARNED_KEY
