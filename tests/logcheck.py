"""Run code with logging on and fail on any logging error.

A log call that raises (a reserved `extra=` key is a KeyError inside logging) or a record the
JSON formatter cannot write only shows at the level that enables the call; the default test
run keeps `remediator` at WARNING and would not see it. This switches the root logger and
`remediator` to a level, formats every record with the service's own JSON formatter, and
collects what went wrong: handler errors, "Task exception was never retrieved", and asyncio
errors (a task that died on a log call)."""

from __future__ import annotations

import gc
import logging
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from remediator.runtime.logs import JsonFormatter

DIED = ("Task exception was never retrieved", "Logging error", "Exception in callback")


class LogRecorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(orjson.loads(self.format(record)))
        except Exception:
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        self.errors.append(f"{record.name} {record.msg!r}: {traceback.format_exc()}")

    def problems(self) -> list[str]:
        died = [
            f"{line['logger']}: {line['msg']} {line.get('exc', '')}"
            for line in self.lines
            if any(d in str(line["msg"]) for d in DIED)
            or (line["logger"] == "asyncio" and line["level"] in ("error", "critical"))
        ]
        return self.errors + died

    def named(self, msg: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["msg"] == msg]


@contextmanager
def strict_logging(level: int) -> Iterator[LogRecorder]:
    root, ours = logging.getLogger(), logging.getLogger("remediator")
    saved = root.level, ours.level, logging.raiseExceptions
    recorder = LogRecorder()
    root.addHandler(recorder)
    root.setLevel(level)
    ours.setLevel(level)
    logging.raiseExceptions = True
    try:
        yield recorder
        gc.collect()  # a task that died unobserved is reported when it is collected
    finally:
        root.removeHandler(recorder)
        root.setLevel(saved[0])
        ours.setLevel(saved[1])
        logging.raiseExceptions = saved[2]
