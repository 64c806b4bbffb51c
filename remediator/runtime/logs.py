"""Structured logs: one JSON object per line, `extra=` fields inline (incident, workflow...)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any, TypeVar

import click
import orjson

from remediator.logfields import field_name

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[field_name(key)] = value  # a library's `ts` never overwrites the line's
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(doc, default=str, option=_OPTIONS).decode()
        except TypeError:  # a string with a lone surrogate (bytes that were not UTF-8)
            return orjson.dumps(_printable(doc), default=str, option=_OPTIONS).decode()


# A field may be keyed by numbers (a step's GPU index): JSON keys them as strings.
_OPTIONS = orjson.OPT_NON_STR_KEYS


def _printable(value: Any) -> Any:
    """`value` with every string's bytes that are not UTF-8 written as `\\xff` escapes."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_printable(k): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(v) for v in value]
    return value


def setup_logging(level: str = "INFO", stream: IO[str] | None = None) -> None:
    """Route every logger (ours and the libraries') through one JSON handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)  # libraries stay quiet unless something is wrong
    logging.getLogger("remediator").setLevel(level.upper())


F = TypeVar("F", bound=Callable[..., Any])


def log_level_option(fn: F) -> F:
    """`--log-level` as every long-running command takes it (env REMEDIATOR_LOG_LEVEL)."""
    return click.option(
        "--log-level",
        envvar="REMEDIATOR_LOG_LEVEL",
        default="INFO",
        show_default=True,
        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
        help="Level of remediator's JSON logs.  [env REMEDIATOR_LOG_LEVEL]",
    )(fn)
