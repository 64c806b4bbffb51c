"""The outbox: every decision let through is written here before anything acts on it.

SQLite (stdlib, WAL, synchronous=FULL): a decision row and the guard state that let
it through are committed in one transaction, then executors take rows from here:

    pending ──submit──▶ submitted ──track──▶ ended      (a workflow ran to its end)
       │                    │
       ├──────────refused───┴──────────────▶ failed     (Argo said no; will not retry)
       └──too old when this replica leads──▶ expired    (never executed late)

    dry                                 (a dry run's "would": passed every guardrail, never
                                         executed; written like an act, with the guard state)

The guard state is kept twice: `state`, the newest of any run (what a dry run restores:
it counts what a live run did and what it "would" itself), and `live_state`, the newest
an acting run wrote (what an acting run restores). A dry run's "would" never happened, so
switched off on the same file, its would-deletions neither hold the pod as a repeat nor
spend a blast-radius slot or a token: the stuck pod it announced is acted on, once.

A crash at any point loses nothing and doubles nothing: a pending row is submitted
again on start, and the workflow name is deterministic, so a submit that had in
fact gone through comes back 409 AlreadyExists, which counts as done. `notify`
decisions run no workflow and go from pending to ended once Slack was told.

Each row tells people three times at most: its act message (`act_at`, then
`slack_ts`), a "not started" reply when its workflow stays Pending too long (`stuck_at`,
then `stuck_ts`), and its end message, the thread reply or "could not act" (`end_at`,
then `end_ts`). The
`*_at` column is the intent, written before the post; the ts after it. An intent
without a ts is a post that may have gone through (a crash or a lost answer): the
worker looks before posting again. A failed row whose end message is not yet told
stays open until it is.

Counts by state live in `outbox_counts`, kept by triggers in the same transaction as
the rows, so `/metrics` reads five rows, never the table. Closed rows are pruned
after a retention period (`prune`). Calls are small statements; the caller may run
them in a thread. `OutboxRows` is the acting component's store on it
(`runtime.rows.RowStore`); the rows' life is `runtime/rows.py`'s to describe.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.guard.state import GuardState
from remediator.runtime.rows import OPEN, STATES, SUBMITTING, Row, State, unknown_fields

__all__ = ["OPEN", "STATES", "Outbox", "OutboxRows", "Row", "State"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    incident   TEXT NOT NULL,
    action     TEXT NOT NULL,
    decision   TEXT NOT NULL,
    state      TEXT NOT NULL,
    workflow   TEXT,
    phase      TEXT,
    error      TEXT,
    slack_ts   TEXT,
    attempts   INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    act_at     REAL,
    end_at     REAL,
    end_ts     TEXT,
    submitted_at REAL,
    stuck_at   REAL,
    stuck_ts   TEXT,
    UNIQUE (incident, action)
);
CREATE TABLE IF NOT EXISTS guard_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    state      TEXT NOT NULL,
    updated_at REAL NOT NULL,
    live_state TEXT
);
CREATE TABLE IF NOT EXISTS outbox_counts (
    state TEXT PRIMARY KEY,
    n     INTEGER NOT NULL
);
-- What other replicas let through (an acting run's), taken from the shared copy
-- (runtime/shared_state.py) by a replica that had no memory of its own: the kill-loop memory.
CREATE TABLE IF NOT EXISTS taken_through (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    decisions  TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS learned (
    model      TEXT NOT NULL,
    phase      TEXT NOT NULL,
    samples    TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (model, phase)
);
"""
# (model, phase) histories kept at most: a cluster's models × their phases and steps, and
# then some; the least recently learned goes first.
LEARNED_KEYS = 20_000
Sample = tuple[str, str, float]

# Columns added since the first release, for state files written before them.
_ADDED = {
    "act_at": "REAL",
    "end_at": "REAL",
    "end_ts": "TEXT",
    "submitted_at": "REAL",
    "stuck_at": "REAL",
    "stuck_ts": "TEXT",
}


# Open: to execute, to follow, or (failed) still to tell. One expression, used by the
# partial index and the query alike, so SQLite reads the index, never the table.
_OPEN = (
    "(state IN ('pending', 'submitted')"
    " OR (state = 'failed' AND end_at IS NOT NULL AND end_ts IS NULL))"
)
_CLOSED = f"(state IN ('ended', 'failed', 'expired', 'dry') AND NOT {_OPEN})"

_INDEXES_AND_TRIGGERS = f"""
DROP INDEX IF EXISTS outbox_open;
CREATE INDEX IF NOT EXISTS outbox_todo ON outbox (id) WHERE {_OPEN};
CREATE INDEX IF NOT EXISTS outbox_closed ON outbox (updated_at) WHERE {_CLOSED};
CREATE TRIGGER IF NOT EXISTS outbox_count_insert AFTER INSERT ON outbox BEGIN
    INSERT INTO outbox_counts (state, n) VALUES (new.state, 1)
        ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS outbox_count_update AFTER UPDATE OF state ON outbox
WHEN old.state IS NOT new.state BEGIN
    UPDATE outbox_counts SET n = n - 1 WHERE state = old.state;
    INSERT INTO outbox_counts (state, n) VALUES (new.state, 1)
        ON CONFLICT (state) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER IF NOT EXISTS outbox_count_delete AFTER DELETE ON outbox BEGIN
    UPDATE outbox_counts SET n = n - 1 WHERE state = old.state;
END;
"""


def _floats(text: str) -> list[float]:
    """A stored history: a JSON list of finite, non-negative seconds (ValueError if not)."""
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf for v in values
    ):
        raise ValueError("not a list of non-negative seconds")
    return [float(v) for v in values]


def _readable(found: tuple[Any, ...] | None) -> list[float]:
    """A stored history to add to; one that does not read back is replaced, not kept."""
    try:
        return _floats(found[0]) if found else []
    except ValueError:
        return []


def decision_to_json(d: Decision) -> str:
    doc = asdict(d)
    doc["params"] = [list(p) for p in d.params]
    return json.dumps(doc, sort_keys=True, allow_nan=False)


def decision_from_json(text: str) -> Decision:
    doc: dict[str, Any] = json.loads(text)
    doc["params"] = tuple((str(k), str(v)) for k, v in doc.get("params") or ())
    doc["ready_created"] = tuple(float(v) for v in doc.get("ready_created") or ())
    # A row an older release wrote may name a field since gone (a hedge's cost, now the
    # guard's to count): read what the decision still has.
    return Decision(**{k: v for k, v in doc.items() if k in _DECISION_FIELDS})


_DECISION_FIELDS = frozenset(Decision.__dataclass_fields__)


class Outbox:
    """One SQLite file; safe to call from one thread at a time (a lock sees to it)."""

    def __init__(self, path: str | Path, now: Callable[[], float] = time.time) -> None:
        self._now = now  # the runtime's clock: rows are stamped and expired on it
        self.path = str(path)
        if self.path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a decision written is a decision kept
        self._db.executescript(_SCHEMA)
        self._migrate()
        return self._db

    # --- the file deleted under it (runtime/statefile.py) -----------------------------
    @contextmanager
    def held(self) -> Iterator[None]:
        """Nothing is read or written meanwhile."""
        with self._lock:
            yield

    def backup_held(self, to: str) -> None:
        """Everything the connection holds, written to a new file `to` (SQLite's backup)."""
        dest = sqlite3.connect(to)
        try:
            self._db.backup(dest)
        finally:
            dest.close()

    def reopen_held(self, close_only: bool = False) -> None:
        self._db.close()
        if not close_only:
            self._connect()

    def _migrate(self) -> None:
        """Add the columns, indexes and triggers a state file from before them lacks, and
        count its rows once (the triggers keep the counts from then on)."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(outbox)")}
        counted = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'outbox_count_insert'"
        ).fetchone()
        script = [
            f"ALTER TABLE outbox ADD COLUMN {c} {t};" for c, t in _ADDED.items() if c not in have
        ]
        guard_cols = {row[1] for row in self._db.execute("PRAGMA table_info(guard_state)")}
        if "live_state" not in guard_cols:
            # A file from before the split: its state is taken as an acting run's (it holds
            # repeats, as it always did) unless only a dry run ever wrote rows to it.
            script.append(
                "ALTER TABLE guard_state ADD COLUMN live_state TEXT;"
                " UPDATE guard_state SET live_state = state WHERE NOT ("
                " EXISTS (SELECT 1 FROM outbox)"
                " AND NOT EXISTS (SELECT 1 FROM outbox WHERE state != 'dry'));"
            )
        if not counted:
            script.append(
                "DELETE FROM outbox_counts; INSERT INTO outbox_counts (state, n)"
                " SELECT state, COUNT(*) FROM outbox GROUP BY state;"
            )
        try:
            self._db.executescript(
                "BEGIN IMMEDIATE;" + "".join(script) + _INDEXES_AND_TRIGGERS + "COMMIT;"
            )
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- writes ----------------------------------------------------------------------
    def record(
        self,
        decisions: list[Decision],
        guard: GuardState | None,
        dry: list[Decision] | None = None,
        acting: bool = True,
    ) -> list[int]:
        """Decisions and the guard state after them, in one transaction. A decision
        already recorded for its (incident, action) is not recorded twice. `dry`: what
        got through in a dry run, written as closed `dry` rows on the same path, so a
        restarted dry run remembers its "would" as a live run remembers its acts; a live
        decision later recorded for a dry row's (incident, action) takes the row over.
        `acting`: False for a dry run, whose guard state an acting run never restores."""
        now = self._now()
        ids: list[int] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for d in decisions:
                    row = self._insert(d, "pending", now)
                    if row is None:  # a dry run's row of it (dry run switched off): act now
                        row = self._db.execute(
                            "UPDATE outbox SET state = 'pending', decision = ?, created_at = ?,"
                            " updated_at = ? WHERE incident = ? AND action = ?"
                            " AND state = 'dry' RETURNING id",
                            (decision_to_json(d), now, now, d.incident, d.action),
                        ).fetchone()
                        row = None if row is None else int(row[0])
                    if row is not None:
                        ids.append(row)
                for d in dry or ():
                    self._insert(d, "dry", now)
                if guard is not None:  # None: rows only (a store's contract tests)
                    self._save_guard(guard, now, acting)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # a full disk: SQLite has rolled back by itself
                    self._db.execute("ROLLBACK")
                raise
        return ids

    def _insert(self, d: Decision, state: State, now: float) -> int | None:
        cur = self._db.execute(
            "INSERT OR IGNORE INTO outbox (incident, action, decision, state,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (d.incident, d.action, decision_to_json(d), state, now, now),
        )
        return cur.lastrowid if cur.rowcount and cur.lastrowid is not None else None

    # --- what the core learned: its history, kept across restarts ----------------------
    def learn(self, samples: Iterable[Sample], keep: int) -> None:
        """Finished cold starts' (model, phase, seconds), in the order learned: each
        (model, phase) keeps its last `keep`, as the core's history does."""
        fresh: dict[tuple[str, str], list[float]] = {}
        for model, phase, seconds in samples:
            fresh.setdefault((model, phase), []).append(seconds)
        now = self._now()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for (model, phase), values in fresh.items():
                    found = self._db.execute(
                        "SELECT samples FROM learned WHERE model = ? AND phase = ?", (model, phase)
                    ).fetchone()
                    kept = [*_readable(found), *values][-keep:]
                    self._db.execute(
                        "INSERT OR REPLACE INTO learned (model, phase, samples, updated_at)"
                        " VALUES (?, ?, ?, ?)",
                        (model, phase, json.dumps(kept), now),
                    )
                self._db.execute(
                    "DELETE FROM learned WHERE rowid IN (SELECT rowid FROM learned"
                    " ORDER BY updated_at DESC LIMIT -1 OFFSET ?)",
                    (LEARNED_KEYS,),
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def learned(self) -> tuple[list[Sample], list[str]]:
        """Every kept sample, oldest first per (model, phase); and what could not be read
        (a history is a help, never a reason not to start: such a row is left out)."""
        with self._lock:
            found = self._db.execute(
                "SELECT model, phase, samples FROM learned ORDER BY updated_at, rowid"
            ).fetchall()
        out: list[Sample] = []
        bad: list[str] = []
        for model, phase, text in found:
            try:
                out.extend((str(model), str(phase), v) for v in _floats(text))
            except ValueError as exc:
                bad.append(f"{model}/{phase}: {exc}")
        return out, bad

    def save_guard(self, guard: GuardState, acting: bool = True) -> None:
        with self._lock:
            self._save_guard(guard, self._now(), acting)

    def _save_guard(self, guard: GuardState, now: float, acting: bool) -> None:
        text = guard.to_json()
        # A dry run's state is never an acting run's: `live_state` keeps the last acting one.
        self._db.execute(
            "INSERT INTO guard_state (id, state, updated_at, live_state) VALUES (1, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " updated_at = excluded.updated_at,"
            " live_state = coalesce(excluded.live_state, guard_state.live_state)",
            (text, now, text if acting else None),
        )

    def mark(self, row_id: int, state: State | None, **fields: str | float | None) -> None:
        """Move a row on; `fields` among workflow, phase, error, attempts and the message
        columns (act_at, slack_ts, end_at, end_ts)."""
        unknown_fields(fields)
        if state is not None:  # None: the state stays as it is
            fields = {"state": state, **fields}
        sets = "".join(f", {k} = ?" for k in fields)
        sql = f"UPDATE outbox SET updated_at = ?{sets} WHERE id = ?"
        with self._lock:
            self._db.execute(sql, (self._now(), *fields.values(), row_id))

    def expire(self, written_before: float, why: str) -> list[Row]:
        """Pending rows written before `written_before` become `expired`: a decision that
        waited too long (on a standby, or behind an outage) is not acted on late."""
        stale = self._rows(
            "WHERE state = 'pending' AND created_at < ? ORDER BY id", (written_before,)
        )
        if stale:
            now = self._now()
            with self._lock:
                self._db.executemany(
                    "UPDATE outbox SET state = 'expired', error = ?, updated_at = ?"
                    " WHERE id = ? AND state = 'pending'",
                    [(why, now, r.id) for r in stale],
                )
        return stale

    def drop_for_gone_pod(self, uid: str, why: str) -> list[Row]:
        """Pending pod deletions (and hedges) aimed at a pod that is gone become `expired`:
        acting on them would be wasted and announced (a pod deleted while the watch was
        cut; a stalled pod deleted, hung, before its hedge was submitted)."""
        gone = [
            r
            for r in self._rows("WHERE state = 'pending' ORDER BY id")
            if r.decision.uid == uid
            and _about_the_pod(r.decision.action)
            and r.phase != SUBMITTING  # perhaps submitted: the pod may be gone by its workflow
        ]
        if gone:
            now = self._now()
            with self._lock:
                self._db.executemany(
                    "UPDATE outbox SET state = 'expired', error = ?, updated_at = ?"
                    " WHERE id = ? AND state = 'pending'",
                    [(why, now, r.id) for r in gone],
                )
        return gone

    # --- reads -------------------------------------------------------------------------
    def guard_state(self, acting: bool = False) -> str | None:
        """The guard state as last saved (`GuardState.to_json`); the session reads it.
        `acting`: as an acting run last saved it (a dry run's "would" never happened, so
        an acting run does not count it); else as any run did (a dry run counts both)."""
        column = "live_state" if acting else "state"
        with self._lock:
            found = self._db.execute(f"SELECT {column} FROM guard_state WHERE id = 1").fetchone()
        return str(found[0]) if found and found[0] is not None else None

    def through(self) -> list[Decision]:
        """What an acting run let through, oldest first (a dry run's "would" never happened)."""
        return [r.decision for r in self.rows() if r.state != "dry"]

    def taken_through(self) -> str | None:
        """What other replicas let through, as taken from the shared copy (`take_through`):
        the JSON list of their decisions; None: nothing taken."""
        with self._lock:
            found = self._db.execute("SELECT decisions FROM taken_through WHERE id = 1").fetchone()
        return str(found[0]) if found else None

    def take_through(self, decisions: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO taken_through (id, decisions, updated_at) VALUES (1, ?, ?)",
                (decisions, self._now()),
            )

    def open_rows(self) -> list[Row]:
        """Pending and submitted rows, and failed ones not yet told, oldest first: what a
        (new) leader has to finish."""
        return self._rows(f"WHERE {_OPEN} ORDER BY id")

    def rows(self) -> list[Row]:
        return self._rows("ORDER BY id")

    def act_message(self, incident: str) -> str | None:
        """The act message (its ts) of the incident's first row that has one (the
        UNIQUE (incident, action) index finds them)."""
        sql = "SELECT slack_ts FROM outbox WHERE incident = ? AND slack_ts IS NOT NULL"
        with self._lock:
            found = self._db.execute(f"{sql} ORDER BY id LIMIT 1", (incident,)).fetchone()
        return str(found[0]) if found else None

    def get(self, row_id: int) -> Row | None:
        found = self._rows("WHERE id = ?", (row_id,))
        return found[0] if found else None

    def counts(self) -> dict[str, int]:
        """Rows by state, as the triggers keep them: a read of five rows, never a scan."""
        with self._lock:
            found = self._db.execute("SELECT state, n FROM outbox_counts WHERE n > 0")
            return {str(state): int(n) for state, n in found.fetchall()}

    def prune(self, closed_before: float, batch: int = 1000) -> int:
        """Delete closed rows (ended, expired, failed and told) last moved before
        `closed_before`, `batch` rows per transaction so writers never wait long. Returns
        how many went. A pruned (incident, action) could be recorded again: retention
        must be longer than any incident lasts (days, against minutes)."""
        deleted = 0
        while True:
            with self._lock:
                cur = self._db.execute(
                    "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox"
                    f" WHERE {_CLOSED} AND updated_at < ? LIMIT ?)",
                    (closed_before, batch),
                )
            deleted += max(cur.rowcount, 0)
            if cur.rowcount < batch:
                return deleted

    def _rows(self, where: str, args: tuple[Any, ...] = ()) -> list[Row]:
        sql = (
            "SELECT id, decision, state, workflow, phase, error, slack_ts, attempts, created_at,"
            " act_at, end_at, end_ts, submitted_at, stuck_at, stuck_ts FROM outbox " + where
        )
        with self._lock:
            found = self._db.execute(sql, args).fetchall()
        return [Row(rid, decision_from_json(doc), *rest) for rid, doc, *rest in found]


class OutboxRows:
    """The acting component's store (`runtime.rows.RowStore`) on the outbox: each call a
    small SQLite statement, run in a thread; durable when it returns (synchronous=FULL)."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox

    async def add(self, decision: Decision) -> None:
        """A row for `decision` (serve's driver writes them with the guard state instead)."""
        await asyncio.to_thread(self.outbox.record, [decision], None)

    async def open_rows(self) -> list[Row]:
        return await asyncio.to_thread(self.outbox.open_rows)

    async def mark(self, row: Row, state: State | None, **fields: str | float | None) -> None:
        await asyncio.to_thread(self.outbox.mark, row.id, state, **fields)

    async def expire(self, written_before: float, why: str) -> list[Row]:
        return await asyncio.to_thread(self.outbox.expire, written_before, why)

    async def prune(self, closed_before: float) -> int:
        return await asyncio.to_thread(self.outbox.prune, closed_before)

    async def act_message(self, incident: str) -> str | None:
        return await asyncio.to_thread(self.outbox.act_message, incident)


def _about_the_pod(name: str) -> bool:
    """The action is about one pod instance: with the pod gone, there is nothing to do."""
    spec = action(name)
    return spec.deletes_pods or spec.starts_pods
