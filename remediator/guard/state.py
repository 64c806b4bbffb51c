"""What the guardrails remember: one small frozen record per stateful stage, keyed by
the stage's name. Each stage defines its own record (`State`, in the stage's file) with
`to_doc()` and `from_doc()`; this container knows none of them.

Records hold only strings, floats and bools, so the whole `GuardState` round-trips
through JSON: the embedded runtime keeps it in SQLite beside its outbox; a streaming
runtime would keep it in its own store through the same two calls. Stages never mutate
a record; `record()` builds a new one, which also keeps a suppressed decision from
leaving a trace.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, Final, Protocol, Self, TypeVar

STATE_VERSION = 1

Stamps = Mapping[str, float]  # key -> when it was let through (seconds since the epoch)


class StateError(ValueError):
    """Stored guard state that cannot be read back; `path` says where."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"guard state {path}: {message}")


class Record(Protocol):
    """A stage's state record: a frozen dataclass whose default is the empty state."""

    def to_doc(self) -> Any: ...

    @classmethod
    def from_doc(cls, value: Any, path: str) -> Self: ...


R = TypeVar("R")

_EMPTY: Final[dict[type[Any], Any]] = {}  # one shared default record per type (records are frozen)


def _empty(kind: type[R]) -> R:
    found = _EMPTY.get(kind)
    if found is None:
        found = _EMPTY[kind] = kind()
    return found


class GuardState:
    """Stage name -> that stage's record. Immutable; a stage at its default state is not
    stored, so two states that remember the same things are equal.

    Records of stages this release does not have (a newer release's guardrail, read back
    after a rollback) are kept as they were read, `foreign`: never used, written back
    unchanged, so rolling forward again finds them. A stage this release has must still
    read whole (its reader is strict)."""

    __slots__ = ("_records", "_foreign")

    def __init__(
        self, records: Mapping[str, Any] | None = None, foreign: Mapping[str, Any] | None = None
    ) -> None:
        self._records: dict[str, Any] = {k: r for k, r in (records or {}).items() if r != type(r)()}
        self._foreign: Mapping[str, Any] = foreign or {}

    def of(self, stage: str, kind: type[R]) -> R:
        """The stage's record, or its default (empty) one."""
        found = self._records.get(stage)
        if found is None:  # inlined: this is on every guardrail's check
            found = _EMPTY.get(kind)
            if found is None:
                found = _empty(kind)
        return found

    def put(self, stage: str, record: Any, default: bool | None = None) -> GuardState:
        """The state with the stage's record replaced. `default`: whether the record is its
        stage's default (not stored), where the caller knows; else it is compared (a
        dataclass's generated __eq__, interpreted: a third of hearing a cold start's pay)."""
        new = GuardState.__new__(GuardState)
        new._records = {k: r for k, r in self._records.items() if k != stage}
        kept = record != _empty(type(record)) if default is None else not default
        if kept:
            new._records[stage] = record
        new._foreign = self._foreign
        return new

    @property
    def foreign(self) -> tuple[str, ...]:
        """The names of the records kept for stages this release does not have."""
        return tuple(sorted(self._foreign))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GuardState)
            and self._records == other._records
            and self._foreign == other._foreign
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._foreign:
            return f"GuardState({self._records!r}, foreign={dict(self._foreign)!r})"
        return f"GuardState({self._records!r})"

    def to_json(self) -> str:
        doc: dict[str, Any] = {"version": STATE_VERSION, **self._foreign}
        doc.update((stage, r.to_doc()) for stage, r in self._records.items())
        return json.dumps(doc, sort_keys=True, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes, kinds: Mapping[str, type[Record]]) -> GuardState:
        """Read what `to_json` wrote; `kinds` (stage name -> record type) comes from the
        pipeline. A record no stage owns is kept as it is (`foreign`), never dropped; a
        record of a stage this release has is read strictly."""
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise StateError("$", f"not JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise StateError("$", f"expected an object, got {type(doc).__name__}")
        if doc.get("version") != STATE_VERSION:
            raise StateError("version", f"expected {STATE_VERSION}, got {doc.get('version')!r}")
        records = {k: kinds[k].from_doc(v, k) for k, v in doc.items() if k in kinds}
        foreign = {k: v for k, v in doc.items() if k not in kinds and k != "version"}
        for k, v in foreign.items():
            try:  # written back as it came: it must be JSON that `to_json` can write
                json.dumps(v, allow_nan=False)
            except ValueError as exc:
                raise StateError(k, f"a record of no guardrail here, and not JSON: {exc}") from exc
        return cls(records, foreign)


def prune(stamps: Stamps, now: float, keep_s: float) -> dict[str, float]:
    """Drop entries at least `keep_s` old, so state stays bounded by the window."""
    return {k: at for k, at in stamps.items() if now - at < keep_s}


# --- strict readers for `from_doc`: stored state that does not fit is refused, never half-read


def read_object(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StateError(path, f"expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise StateError(f"{path}.{unknown[0]}", "unknown key")
    return value


def read_number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StateError(path, f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise StateError(path, "expected a finite number")
    return float(value)


def read_rows(raw: Any, path: str, shape: str, size: int) -> Iterator[tuple[str, list[Any]]]:
    """Each item of a stored list of `size`-item lists, with where it is; anything else
    refused (`shape` names the items for the error: "[workload, at]")."""
    if not isinstance(raw, list):
        raise StateError(path, "expected a list")
    for i, item in enumerate(raw):
        if not isinstance(item, list) or len(item) != size:
            raise StateError(f"{path}[{i}]", f"expected {shape}")
        yield f"{path}[{i}]", item


def read_pairs(raw: Any, path: str, shape: str) -> tuple[tuple[str, float], ...]:
    """A list of [name, number] pairs; `shape` names them for the error ("[workload, at]")."""
    return tuple(
        (read_str(item[0], where), read_number(item[1], where))
        for where, item in read_rows(raw, path, shape, 2)
    )


def read_str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise StateError(path, f"expected a string, got {type(value).__name__}")
    return value


def read_stamps(value: Any, stage: str, key: str) -> dict[str, float]:
    inner = read_object(value, stage, {key}).get(key, {})
    if not isinstance(inner, dict):
        raise StateError(f"{stage}.{key}", f"expected an object, got {type(inner).__name__}")
    return {k: read_number(v, f"{stage}.{key}.{k}") for k, v in inner.items()}
