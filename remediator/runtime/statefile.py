"""The state file (`--state-db`): one SQLite file, the outbox's and the inbox's tables.

At start, a file that cannot be used (not SQLite, corrupt, another program's tables, a
directory) is `StateFileError`: one message names the file and why, the file is left as it
is for an SRE to look at, and serve exits 3. Never a traceback, never a silent fresh start
over what may hold undecided inputs.

While running, `StateFile.check` (once a second) looks that the path still names the file
the connections write. Deleted (`rm`, a cleanup of /tmp): the connections still hold all of
it, so it is written to a new file at the path with SQLite's backup, and the connections
move to that one; nothing is lost, and no webhook is answered 2xx meanwhile (the inbox
refuses to write to a file that is gone: 503, the sender retries). Replaced by another
file: that one is not overwritten; webhooks get 503 and both probes fail until it is moved
away (then the open copy is recreated) or serve is restarted (then it is used).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from remediator.logfields import get_logger
from remediator.runtime.inbox import FileGone, Inbox, StoreHealth, file_id
from remediator.runtime.outbox import Outbox

log = get_logger("remediator.runtime")

EXIT_CODE = 3  # serve's exit code when the state file cannot be used


class StateFileError(Exception):
    """The state file cannot be used; the message says which and why."""


def unusable(path: str, exc: BaseException) -> StateFileError:
    why = str(exc) or type(exc).__name__
    if Path(path).is_dir():
        why += " (it is a directory)"
    return StateFileError(
        f"state file {path} cannot be used: {why}. It is left as it is: move it away "
        "(serve then starts with a new one) or give --state-db another path"
    )


OPEN_ERRORS = (sqlite3.Error, OSError)  # what opening it may raise besides unreadable state


class StateFile:
    """Keeps the outbox and the inbox writing to the file at their path."""

    def __init__(self, outbox: Outbox, inbox: Inbox | None, health: StoreHealth) -> None:
        self.outbox = outbox
        self.inbox = inbox
        self.health = health
        self.path = outbox.path
        self.file = file_id(self.path)
        self._replaced: tuple[int, int] | None = None  # the other file, once said

    def check(self) -> None:
        """Once a second, in a thread (the backup of a large file takes a moment)."""
        if self.path == ":memory:":
            return
        now = file_id(self.path)
        if now == self.file:
            return
        if now is None:
            self._recreate()
        elif now != self._replaced:
            self._replaced = now
            why = f"state file {self.path} was replaced by another file while running"
            log.error(
                "state file replaced while running: webhooks refused",
                extra={"path": self.path, "hint": "move it away, or restart serve to use it"},
            )
            self.health.failed("inbox", FileGone(why))

    def _recreate(self) -> None:
        log.error("state file deleted while running: recreating it", extra={"path": self.path})
        inbox = self.inbox.held() if self.inbox is not None else contextlib.nullcontext()
        with inbox, self.outbox.held():  # nothing is written while the file moves
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            fresh = f"{self.path}.recreated"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(fresh)
            self.outbox.backup_held(fresh)  # every table: the inbox's too
            self.outbox.reopen_held(close_only=True)
            if self.inbox is not None:
                self.inbox.reopen_held(close_only=True)
            for stale in ("-wal", "-shm"):  # the old file's, if only it was deleted
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path + stale)
            os.replace(fresh, self.path)
            self.outbox.reopen_held()
            if self.inbox is not None:
                self.inbox.reopen_held()
        self.file = file_id(self.path)
        self._replaced = None
        log.warning("state file recreated from the open copy", extra={"path": self.path})
