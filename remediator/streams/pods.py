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
what got through (the kill-loop memory) and cold starts learned elsewhere under the
feedback key, never pruned (`streams.core.feedback_runs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping
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

    @property
    def prefix(self) -> str:
        return f"{self.partition}|"

    # ---- reading ------------------------------------------------------------------------
    def replay(self) -> list[Entry]:
        """Everything to rebuild the core from, in offset order (and the index of rows)."""
        prefix = self.prefix
        entries: list[Entry] = []
        for name, value in list(self.table.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
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
        entries.sort(key=lambda e: (e.offset, not e.samples, e.index))
        return entries

    # ---- writing ------------------------------------------------------------------------
    def add(self, offset: int, raw: str, key: str, at: float | None = None, index: int = 0) -> None:
        """A document the core took (`at`: when it arrived; `index`: its place in the
        envelope at `offset`); written with the batch."""
        if key.startswith(TICK) or raw.startswith(_TICK_PREFIX):
            # Of these only the last matters: a tick, the watch's word, a complete list.
            self._latest[key if key.startswith(TICK) else TICK] = [offset, raw, index, at]
        else:
            self._batch.append([offset, raw, key, at, index])

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
            written += 1
        return written
