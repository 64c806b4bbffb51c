"""Timestamps and durations as Kubernetes and Go write them, parsed to float seconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

_GO_UNIT_S = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


@lru_cache(maxsize=65536)
def parse_time(value: str) -> float:
    """RFC 3339 (with `Z`, offsets, and the microseconds of MicroTime) → epoch seconds.

    Cached because a watch stream repeats the same few timestamps in every update of an
    object (creation, conditions), and the cache turns a parse into a dict lookup.
    Raises ValueError on anything else.
    """
    if not isinstance(value, str) or len(value) < 20:
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
    if value[-1] == "z":  # RFC 3339 §5.6 allows a lower-case Z; fromisoformat does not
        value = value[:-1] + "Z"
    dt = datetime.fromisoformat(value)
    if dt.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {value!r}")
    return dt.timestamp()


def parse_time_or_none(value: object) -> float | None:
    """Like parse_time, for optional fields: None and "" mean absent; garbage raises."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
    return parse_time(value)


def format_time(ts: float) -> str:
    """Epoch seconds → RFC 3339 UTC with `Z`, milliseconds only when needed."""
    dt = datetime.fromtimestamp(ts, tz=UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_go_duration(text: str) -> float:
    """Go's time.Duration.String() form ("1m2.5s", "717ms", "2h0m0s", "1.5µs") → seconds."""
    s = text.strip()
    sign = -1.0 if s.startswith("-") else 1.0
    s = s.lstrip("+-")
    if s == "0":
        return 0.0
    if s[-1:] == "s" and s[:-1].replace(".", "", 1).isdecimal():
        return sign * float(s[:-1])  # plain seconds ("49.657983991s"): what kubelets write
    pos, total = 0, 0.0
    for m in _GO_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _GO_UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(s) or not s:
        raise ValueError(f"not a Go duration: {text!r}")
    return sign * total
