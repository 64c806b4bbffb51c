"""Log fields, made safe in one place.

A caller's `extra=` key that is a LogRecord attribute (`created`, `msg`, `name`, ...) makes
logging raise KeyError while building the record, at whatever level first enables the call;
one that is a JSON line's own key (`ts`, `level`, ...) would overwrite it. Every remediator
logger is a `FieldLogger`, which renames such keys to `extra_<key>` instead; the formatter
uses the same rule for records from other libraries."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

LINE_KEYS = frozenset({"ts", "level", "logger", "msg", "exc"})
RESERVED = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"} | LINE_KEYS


def field_name(key: str) -> str:
    return f"extra_{key}" if key in RESERVED else key


def safe_fields(fields: Mapping[str, object]) -> dict[str, object]:
    return {field_name(key): value for key, value in fields.items()}


class FieldLogger(logging.LoggerAdapter[logging.Logger]):
    """A logger whose `extra=` fields can never collide (see the module doc)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        extra = kwargs.get("extra")
        if extra:
            kwargs["extra"] = safe_fields(extra)
        return msg, kwargs


def get_logger(name: str) -> FieldLogger:
    return FieldLogger(logging.getLogger(name), {})
