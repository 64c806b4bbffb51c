"""The outbox: every decision let through is written here before anything acts on it.

SQLite (stdlib, WAL, synchronous=FULL): a decision row and the guard state that let
it through are committed in one transaction, then executors take rows from here:

    pending ──submit──▶ submitted ──track──▶ ended      (a workflow ran to its end)
       │                    │
       ├──────────refused───┴──────────────▶ failed     (Argo said no; will not retry)
       └──too old when this replica leads──▶ expired    (never executed late)

A crash at any point loses nothing and doubles nothing: a pending row is submitted
again on start, and the workflow name is deterministic, so a submit that had in
fact gone through comes back 409 AlreadyExists, which counts as done. `notify`
decisions run no workflow and go from pending to ended once Slack was told.
Calls are small single-row statements; the caller may run them in a thread.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from remediator.contract.decision import Decision
from remediator.guard.state import GuardState

State = Literal["pending", "submitted", "ended", "failed", "expired"]
STATES: tuple[State, ...] = ("pending", "submitted", "ended", "failed", "expired")
OPEN: tuple[State, ...] = ("pending", "submitted")

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
    UNIQUE (incident, action)
);
CREATE INDEX IF NOT EXISTS outbox_open ON outbox (state) WHERE state IN ('pending', 'submitted');
CREATE TABLE IF NOT EXISTS guard_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    state      TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


def decision_to_json(d: Decision) -> str:
    doc = asdict(d)
    doc["params"] = [list(p) for p in d.params]
    return json.dumps(doc, sort_keys=True, allow_nan=False)


def decision_from_json(text: str) -> Decision:
    doc: dict[str, Any] = json.loads(text)
    doc["params"] = tuple((str(k), str(v)) for k, v in doc.get("params") or ())
    return Decision(**doc)


@dataclass(frozen=True, slots=True)
class Row:
    id: int
    decision: Decision
    state: State
    workflow: str | None
    phase: str | None
    error: str | None
    slack_ts: str | None
    attempts: int
    created_at: float  # wall time the decision was written

    @property
    def incident(self) -> str:
        return self.decision.incident


class Outbox:
    """One SQLite file; safe to call from one thread at a time (a lock sees to it)."""

    def __init__(self, path: str | Path, now: Callable[[], float] = time.time) -> None:
        self._now = now  # the runtime's clock: rows are stamped and expired on it
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a decision written is a decision kept
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- writes ----------------------------------------------------------------------
    def record(self, decisions: list[Decision], guard: GuardState) -> list[int]:
        """Decisions and the guard state after them, in one transaction. A decision
        already recorded for its (incident, action) is not recorded twice."""
        now = self._now()
        ids: list[int] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for d in decisions:
                    cur = self._db.execute(
                        "INSERT OR IGNORE INTO outbox (incident, action, decision, state,"
                        " created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?)",
                        (d.incident, d.action, decision_to_json(d), now, now),
                    )
                    if cur.rowcount and cur.lastrowid is not None:
                        ids.append(cur.lastrowid)
                self._save_guard(guard, now)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return ids

    def save_guard(self, guard: GuardState) -> None:
        with self._lock:
            self._save_guard(guard, self._now())

    def _save_guard(self, guard: GuardState, now: float) -> None:
        self._db.execute(
            "INSERT INTO guard_state (id, state, updated_at) VALUES (1, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
            " updated_at = excluded.updated_at",
            (guard.to_json(), now),
        )

    def mark(self, row_id: int, state: State, **fields: str | int | None) -> None:
        """Move a row on; `fields` among workflow, phase, error, slack_ts, attempts."""
        allowed = {"workflow", "phase", "error", "slack_ts", "attempts"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"unknown outbox fields {sorted(unknown)}")
        sets = ", ".join(f"{k} = ?" for k in fields)
        sql = (
            f"UPDATE outbox SET state = ?, updated_at = ?{', ' if sets else ''}{sets} WHERE id = ?"
        )
        with self._lock:
            self._db.execute(sql, (state, self._now(), *fields.values(), row_id))

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

    # --- reads -------------------------------------------------------------------------
    def guard_state(self) -> str | None:
        """The guard state as last saved (`GuardState.to_json`); the session reads it."""
        with self._lock:
            found = self._db.execute("SELECT state FROM guard_state WHERE id = 1").fetchone()
        return str(found[0]) if found else None

    def open_rows(self) -> list[Row]:
        """Pending and submitted rows, oldest first: what a (new) leader has to finish."""
        return self._rows("WHERE state IN ('pending', 'submitted') ORDER BY id")

    def rows(self) -> list[Row]:
        return self._rows("ORDER BY id")

    def get(self, row_id: int) -> Row | None:
        found = self._rows("WHERE id = ?", (row_id,))
        return found[0] if found else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            found = self._db.execute("SELECT state, COUNT(*) FROM outbox GROUP BY state")
            return {str(state): int(n) for state, n in found.fetchall()}

    def _rows(self, where: str, args: tuple[Any, ...] = ()) -> list[Row]:
        sql = (
            "SELECT id, decision, state, workflow, phase, error, slack_ts, attempts, created_at"
            " FROM outbox " + where
        )
        with self._lock:
            found = self._db.execute(sql, args).fetchall()
        return [
            Row(rid, decision_from_json(doc), state, wf, phase, err, ts, attempts, at)
            for rid, doc, state, wf, phase, err, ts, attempts, at in found
        ]
