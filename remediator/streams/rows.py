"""The acting component's rows on Kafka: one Faust table entry per row, its changelog the
truth (`runtime.rows.RowStore`, as serve's SQLite outbox is).

    key   "<incident>\\n<action>"     one row per decision, as the outbox's UNIQUE
    value the row (`Stored`, through `contract.codec`), with the commands partition it
          came in on: the changelog partition it is written to, held by the worker that
          holds that commands partition (the table is co-partitioned with the topic)

Every write goes to the local store and to the changelog, and returns once the broker
acknowledged it (the producer is flushed, acks=all): an intent written before a Slack
post is on the broker before the post, so the worker that takes the partition over after
a SIGKILL restores it and looks in the channel before posting again. A command delivered
twice finds its row and adds nothing.

The table itself is given as a mapping (`table.data`, Faust's in-memory store, rebuilt
from the changelog when the partition is assigned) and a `write(partition, key, value)`
that logs one change (None: a tombstone). Ids are this process's handles for rows, for
the acting component's in-memory schedules; they are not stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping

import msgspec

from remediator.contract.codec import decode, encode
from remediator.contract.decision import Decision
from remediator.runtime.rows import Row, State, unknown_fields

Write = Callable[[int, bytes, bytes | None], Awaitable[None]]


class Stored(msgspec.Struct, frozen=True):
    """A row as the table keeps it."""

    partition: int
    decision: Decision
    state: State
    created_at: float
    updated_at: float
    workflow: str | None = None
    phase: str | None = None
    error: str | None = None
    slack_ts: str | None = None
    attempts: int = 0
    act_at: float | None = None
    end_at: float | None = None
    end_ts: str | None = None
    submitted_at: float | None = None
    stuck_at: float | None = None
    stuck_ts: str | None = None


_ROW_FIELDS = tuple(f for f in Stored.__struct_fields__ if f not in ("partition", "updated_at"))
_CLOSED: tuple[State, ...] = ("ended", "failed", "expired")


def row_key(decision: Decision) -> bytes:
    return f"{decision.incident}\n{decision.action}".encode()


class TableRows:
    """`RowStore` on a table: the rows of the partitions `owned` says this process holds."""

    def __init__(
        self,
        data: MutableMapping[bytes, bytes],
        write: Write,
        now: Callable[[], float],
        owned: Callable[[int], bool] = lambda partition: True,
    ) -> None:
        self.data = data
        self._write = write
        self._now = now
        self._owned = owned
        self._ids: dict[bytes, int] = {}
        self._keys: dict[int, bytes] = {}
        self._next_id = 0
        # Each value decoded once: a pass every second reads every row, most unchanged.
        self._decoded: dict[bytes, tuple[bytes, Stored]] = {}

    async def add(self, decision: Decision, partition: int) -> Row | None:
        """The row of a command just taken; None if it has one already (redelivered)."""
        key = row_key(decision)
        if key in self.data:
            return None
        now = self._now()
        stored = Stored(partition, decision, "pending", now, now)
        await self._put(key, stored)
        return self._row(key, stored)

    async def open_rows(self) -> list[Row]:
        rows = [self._row(k, s) for k, s in self._mine()]
        return sorted((r for r in rows if r.open), key=lambda r: (r.created_at, r.id))

    async def mark(self, row: Row, state: State | None, **fields: str | float | None) -> None:
        unknown_fields(fields)
        key = self._keys.get(row.id) or row_key(row.decision)
        found = self.data.get(key)
        if found is None:  # pruned, or its partition given up: nothing left to move on
            return
        stored = decode(found, Stored)
        if state is not None:
            fields = {"state": state, **fields}
        await self._put(key, msgspec.structs.replace(stored, updated_at=self._now(), **fields))

    async def expire(self, written_before: float, why: str) -> list[Row]:
        mine = self._mine()
        stale = [(k, s) for k, s in mine if s.state == "pending" and s.created_at < written_before]
        now = self._now()
        for key, s in stale:
            await self._put(key, msgspec.structs.replace(s, state="expired", error=why,
                                                         updated_at=now))  # fmt: skip
        return [self._row(k, s) for k, s in stale]

    async def prune(self, closed_before: float) -> int:
        gone = [
            (k, s)
            for k, s in self._mine()
            if s.state in _CLOSED and not self._row(k, s).open and s.updated_at < closed_before
        ]
        for key, s in gone:
            self.data.pop(key, None)
            self._keys.pop(self._ids.pop(key, 0), None)  # recorded again, it is a new row
            await self._write(s.partition, key, None)  # a tombstone: compaction drops it
        return len(gone)

    async def act_message(self, incident: str) -> str | None:
        """The rows of an incident share its commands partition (`streams.keys.command_key`
        puts a decision told under another incident in that one's)."""
        prefix = f"{incident}\n".encode()
        found = [s for k, s in self._mine() if k.startswith(prefix) and s.slack_ts is not None]
        return min(found, key=lambda s: s.created_at).slack_ts if found else None

    def counts(self) -> dict[str, int]:
        """This worker's rows by state (`remediator_outbox_rows`, as serve's outbox)."""
        out: dict[str, int] = {}
        for _, s in self._mine():
            out[s.state] = out.get(s.state, 0) + 1
        return out

    # --- helpers ------------------------------------------------------------------------
    def _mine(self) -> list[tuple[bytes, Stored]]:
        out = []
        for key, value in list(self.data.items()):
            cached = self._decoded.get(key)
            if cached is not None and cached[0] == value:
                stored = cached[1]
            else:
                stored = decode(value, Stored)
                self._decoded[key] = (value, stored)
            if self._owned(stored.partition):
                out.append((key, stored))
        if len(self._decoded) > len(self.data):  # pruned, or restored without them
            self._decoded = {k: v for k, v in self._decoded.items() if k in self.data}
        return out

    async def _put(self, key: bytes, stored: Stored) -> None:
        value = encode(stored)
        self.data[key] = value
        await self._write(stored.partition, key, value)

    def _row(self, key: bytes, stored: Stored) -> Row:
        found = self._ids.get(key)
        if found is None:
            self._next_id += 1
            found = self._ids[key] = self._next_id
            self._keys[found] = key
        return Row(found, **{f: getattr(stored, f) for f in _ROW_FIELDS})
