"""The state file (`--state-db`): one SQLite file, the outbox's and the inbox's tables.

At start, a file that cannot be used (not SQLite, corrupt, another program's tables, a
directory) is `StateFileError`: one message names the file and why, the file is left as it
is for an SRE to look at, and serve exits 3. Never a traceback, never a silent fresh start
over what may hold undecided inputs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
