"""The inbox: webhook inputs written to the state file before `POST /events` answers 2xx.

    POST /events ──▶ InboxWriter.store ──(group commit: one transaction, one fsync for every
                     request waiting)──▶ inbox row ──▶ 2xx;  the inputs ──▶ backlog ──▶ core

A row is the body as `decode()` reads it, kept for `keep_s` (the last `keep_rows` at most).
A restart feeds every kept row again, in order, before anything else: those never fed (a
crash right after the 2xx), and those fed, because what the session learnt from them (a
firing alert, a pod known only from webhooks, a budget still running) lived in memory only.
Nothing is decided twice: the guard state is restored first (idempotency), the outbox keeps
one row per incident and action, and the core takes a fact it already had as the duplicate
it is, as it does a relist. Same SQLite file as the outbox, own table, own connection (WAL).

A write that fails (disk full, read-only file, locked) is reported to `StoreHealth`, which
logs the failure and the recovery once each; while it fails, `store` refuses at once (the
sender gets 503 and retries) and the writer tries again every `retry_s`, so it notices the
disk being fixed without any traffic.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from remediator.logfields import get_logger
from remediator.runtime.clock import Clock, wait

log = get_logger("remediator.runtime")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT NOT NULL,
    body       BLOB NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_created ON inbox (created_at);
CREATE TABLE IF NOT EXISTS inbox_check (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at REAL NOT NULL
);
"""


class FileGone(sqlite3.OperationalError):
    """The path no longer names the file the connection writes (deleted, or replaced)."""


def file_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, None when there is none."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


class StoreFailed(Exception):
    """The state file would not take the write; the reason is the message."""


class InboxFull(StoreFailed):
    """No room in `keep_bytes` for the body: the sender retries (503), the store is fine."""


# The inbox's bound in bytes, sized against deploy/base's 64 MiB emptyDir at /tmp: the state
# file holds at most this much of bodies (plus the outbox, small), and its WAL grows by at
# most one group commit before a checkpoint shrinks it back to WAL_LIMIT. 16 + 16 + a few MiB
# leaves room for everything else under /tmp. MAX_BODY (4 MiB) always fits.
KEEP_BYTES = 16 * 1024 * 1024
KEEP_RECENT_S = 60.0  # rows this young are never dropped to make room
WAL_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Stored:
    id: int
    kind: str
    body: bytes


class Inbox:
    """The `inbox` table. Called from one thread at a time (a lock sees to it)."""

    def __init__(
        self,
        path: str | Path,
        now: Callable[[], float] = time.time,
        timeout_s: float = 5.0,
        keep_s: float = 3600.0,
        keep_rows: int = 100_000,
        keep_bytes: int = KEEP_BYTES,
        keep_recent_s: float = KEEP_RECENT_S,
    ) -> None:
        self._now = now
        self.keep_s = keep_s
        self.keep_rows = keep_rows
        self.keep_bytes = keep_bytes
        self.keep_recent_s = keep_recent_s
        self.dropped = 0  # rows dropped to make room for newer ones (for the log)
        self._pruned = float("-inf")
        self.path = str(path)
        self._timeout_s = timeout_s
        if self.path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = self._connect()

    def _connect(self) -> sqlite3.Connection:
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=self._timeout_s
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a 2xx is a stored input
        self._db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")  # the WAL shrinks again
        self._db.executescript(_SCHEMA)
        self.file = file_id(self.path)  # the file this connection writes
        self.bytes = self._sum()  # bodies kept, kept current by every write
        return self._db

    def _sum(self, where: str = "1", *args: float) -> int:
        found = self._db.execute(
            f"SELECT COALESCE(SUM(length(body)), 0) FROM inbox WHERE {where}", args
        ).fetchone()
        return int(found[0])

    # --- the file deleted under it (runtime/statefile.py) -----------------------------
    @contextmanager
    def held(self) -> Iterator[None]:
        """Nothing is read or written meanwhile."""
        with self._lock:
            yield

    def reopen_held(self, close_only: bool = False) -> None:
        self._db.close()
        if not close_only:
            self._connect()

    def _same_file(self) -> None:
        """A write to a file deleted or replaced under the connection would be lost at the
        next start: refused instead (503, the sender retries) until it is recreated."""
        if self.path != ":memory:" and file_id(self.path) != self.file:
            raise FileGone(f"state file {self.path} was deleted or replaced while running")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def write(self, new: Sequence[tuple[str, bytes]]) -> list[int | None]:
        """Store `new` (and drop rows past keeping) in one transaction; their ids, in order,
        None for a body there is no room for (see `_room`). With nothing new it still writes
        (one row of its own): a check that the file takes writes again."""
        now = self._now()
        with self._lock:
            self._same_file()
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._prune(now)
                ids = [self._insert(kind, body, now) for kind, body in new]
                self._cut_rows()
                if not new:
                    self._db.execute(
                        "INSERT OR REPLACE INTO inbox_check (id, at) VALUES (1, ?)", (now,)
                    )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLite rolls back by itself on some errors
                    self._db.execute("ROLLBACK")
                self.bytes = self._sum()
                raise
        return ids

    def _insert(self, kind: str, body: bytes, now: float) -> int | None:
        if not self._room(len(body), now):
            return None
        cur = self._db.execute(
            "INSERT INTO inbox (kind, body, created_at) VALUES (?, ?, ?)", (kind, body, now)
        )
        assert cur.lastrowid is not None
        self.bytes += len(body)
        return cur.lastrowid

    def _room(self, size: int, now: float) -> bool:
        """Whether `size` more bytes fit in `keep_bytes`: the oldest rows are dropped for it,
        but never one younger than `keep_recent_s` (it may not have been fed yet); when
        those alone fill it, the body is refused (503: the sender retries)."""
        need = self.bytes + size - self.keep_bytes
        if need <= 0:
            return True
        old = self._db.execute(
            "SELECT id, length(body) FROM inbox WHERE created_at < ? ORDER BY id LIMIT 10000",
            (now - self.keep_recent_s,),
        )
        freed, upto, rows = 0, None, 0
        for row_id, n in old:
            freed, upto, rows = freed + int(n), int(row_id), rows + 1
            if freed >= need:
                break
        if freed < need or upto is None:
            return False
        self._db.execute("DELETE FROM inbox WHERE id <= ?", (upto,))
        self.bytes -= freed
        self.dropped += rows
        return True

    def _prune(self, now: float) -> None:
        """Rows past keep_s: at most once a second, an index range."""
        if now - self._pruned < 1.0:
            return
        self._pruned = now
        self.bytes -= self._sum("created_at < ?", now - self.keep_s)
        self._db.execute("DELETE FROM inbox WHERE created_at < ?", (now - self.keep_s,))

    def _cut_rows(self) -> None:
        """Rows past the newest keep_rows: an index range, nearly always empty."""
        last = self._db.execute("SELECT MAX(id) FROM inbox").fetchone()[0]
        if last is not None and last > self.keep_rows:
            self.bytes -= self._sum("id <= ?", last - self.keep_rows)
            self._db.execute("DELETE FROM inbox WHERE id <= ?", (last - self.keep_rows,))

    def kept(self) -> list[Stored]:
        """Every row kept, oldest first: what a restart feeds again."""
        with self._lock:
            found = self._db.execute("SELECT id, kind, body FROM inbox ORDER BY id").fetchall()
        return [Stored(int(i), str(k), bytes(b)) for i, k, b in found]


class StoreHealth:
    """Whether the state file takes writes, by writer (inbox, outbox); each change logged once."""

    def __init__(self) -> None:
        self._failing: dict[str, str] = {}

    def failed(self, part: str, exc: BaseException) -> None:
        why = f"{type(exc).__name__}: {exc}"
        if self._failing.get(part) != why:
            log.error("state file write failed", extra={"part": part, "error": why})
        self._failing[part] = why

    def ok(self, part: str) -> None:
        if self._failing.pop(part, None) is not None:
            log.warning("state file writable again", extra={"part": part})

    def failing(self, part: str | None = None) -> str | None:
        """The reason writes fail (for `part`, or any), None while they succeed."""
        if part is not None:
            return self._failing.get(part)
        return next((f"{p}: {why}" for p, why in self._failing.items()), None)


A = TypeVar("A")  # what a caller attaches to its `store`: handed to `settled`


class InboxWriter(Generic[A]):
    """Group commit: every `store` waiting when a transaction starts shares it (one fsync).
    `settled(attached, id)` is called once per `store`, whatever became of its caller: the
    inbox id, or None when the write failed."""

    def __init__(
        self,
        inbox: Inbox,
        health: StoreHealth,
        clock: Clock,
        settled: Callable[[A, int | None], None],
        retry_s: float = 1.0,
    ) -> None:
        self.inbox = inbox
        self.health = health
        self.clock = clock
        self._settled = settled
        self.retry_s = retry_s
        self._waiting: list[tuple[str, bytes, A, asyncio.Future[int]]] = []
        self._wake = asyncio.Event()
        self._closing = False

    async def store(self, kind: str, body: bytes, attached: A) -> int:
        """The row's id once committed; StoreFailed when the file will not take it.
        `settled(attached, id or None)` has run before this returns, and runs even if the
        caller stopped waiting, so a stored input always reaches the session."""
        failing = "shutting down" if self._closing else self.health.failing("inbox")
        if failing is not None:
            self._settled(attached, None)
            raise StoreFailed(failing)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting.append((kind, body, attached, future))
        self._wake.set()
        return await future

    async def run(self) -> None:
        """Until `close()`: never cancelled mid-write, so no caller is left waiting."""
        while not self._closing:
            if self.health.failing("inbox") is not None:
                await wait(self._wake, self.retry_s, self.clock)  # a check write, or traffic
            else:
                await self._wake.wait()
            self._wake.clear()
            await self.commit()
        await self.commit()  # what came meanwhile

    async def commit(self) -> None:
        batch, self._waiting = self._waiting, []
        if not batch and self.health.failing("inbox") is None:
            return  # nothing to store, nothing to check
        try:
            ids = await asyncio.to_thread(self.inbox.write, [(k, b) for k, b, _, _ in batch])
            dropped, self.inbox.dropped = self.inbox.dropped, 0
        except Exception as exc:  # every caller hears, whatever it was
            for _, _, attached, future in batch:
                self._settled(attached, None)
                if not future.done():
                    future.set_exception(StoreFailed(f"{type(exc).__name__}: {exc}"))
            if not isinstance(exc, sqlite3.Error):
                raise  # a bug: the supervisor logs it and restarts the writer
            self.health.failed("inbox", exc)
            return
        self.health.ok("inbox")
        if dropped:
            log.warning("inbox full: oldest stored inputs dropped", extra={"rows": dropped})
        for (_, _, attached, future), row_id in zip(batch, ids, strict=True):
            self._settled(attached, row_id)
            if future.done():
                continue
            if row_id is None:
                future.set_exception(InboxFull(self._full()))
            else:
                future.set_result(row_id)

    def _full(self) -> str:
        i = self.inbox
        return (
            f"inbox full: {i.bytes} bytes of inputs from the last {i.keep_recent_s:g}s kept "
            f"(limit {i.keep_bytes}); try again"
        )

    def close(self) -> None:
        """Take nothing more; `run` writes what waits, then returns."""
        self._closing = True
        self._wake.set()
