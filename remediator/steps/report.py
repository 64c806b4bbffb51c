"""How a step talks: one JSON verdict on stdout, JSON log lines on stderr, an exit code.

Argo captures a container's stdout as `outputs.result`, so stdout carries the
verdict and nothing else; everything a human reads while it runs goes to stderr.
Standard library only, so the GPU verifier runs on a bare node image.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

from remediator.logfields import safe_fields


class ExitCode(IntEnum):
    OK = 0  # done, or nothing was left to do; GPU memory stable
    UNSTABLE = 1  # the check ran and said no: GPU memory has not settled
    USAGE = 2  # bad flags or values; nothing was called (click's own code for usage errors)
    PRECONDITION = 3  # the target is not in a state where the action is safe; nothing changed
    TIMEOUT = 4  # the change was made but did not complete within --timeout
    ERROR = 5  # could not find out: API unreachable or refused, nvidia-smi failed; retryable


EXIT_CODES_HELP = """\b
Exit codes (the same for every step):
  0  done, or nothing left to do (already gone, replaced, already cordoned, stable)
  1  unstable: the check ran and GPU memory has not settled
  2  bad usage: invalid flag or value; nothing was called
  3  precondition not met: target missing or not safe to act on; nothing changed
  4  timeout: the change was made but did not finish within --timeout
  5  error: could not ask (API unreachable/refused, nvidia-smi failed); retryable"""

_context: dict[str, Any] = {}


def emit(verdict: dict[str, Any]) -> None:
    """Write the verdict: one JSON object, one line, on stdout."""
    sys.stdout.write(json.dumps(verdict, default=str) + "\n")
    sys.stdout.flush()


class _JsonLines(logging.Handler):
    """Formats each record as one JSON line on whatever sys.stderr is now."""

    def emit(self, record: logging.LogRecord) -> None:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **_context,
            **safe_fields(getattr(record, "fields", {})),
        }
        if record.exc_info and record.exc_info[1] is not None:
            line["error"] = repr(record.exc_info[1])
        try:
            sys.stderr.write(json.dumps(line, default=str) + "\n")
        except Exception:  # a log line must never take the step down
            self.handleError(record)


def configure(step: str, incident: str | None, level: int = logging.INFO) -> None:
    """Route all logging (ours and the client libraries') as JSON lines to stderr,
    with the step name and incident id on every line."""
    _context.clear()
    _context["step"] = step
    if incident:
        _context["incident"] = incident
    root = logging.getLogger()
    if not any(isinstance(h, _JsonLines) for h in root.handlers):
        root.addHandler(_JsonLines())
    root.setLevel(logging.WARNING)  # libraries: warnings and up
    logging.getLogger("remediator.steps").setLevel(level)


def log(msg: str, level: int = logging.INFO, **fields: Any) -> None:
    logging.getLogger("remediator.steps").log(level, msg, extra={"fields": fields})
