"""What the guardrails remember, one small record per stateful stage.

Every record is frozen and holds only strings, floats and bools, so the whole
`GuardState` round-trips through JSON: the embedded runtime keeps it in SQLite,
the Faust runtime in a table. Stages never mutate a record; `record()` builds a
new one, which also keeps a suppressed decision from leaving a trace.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

STATE_VERSION = 1

Stamps = Mapping[str, float]  # key -> when it was let through (seconds since the epoch)


class StateError(ValueError):
    """Stored guard state that cannot be read back; `path` says where."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"guard state {path}: {message}")


@dataclass(frozen=True, slots=True)
class KillSwitchState:
    engaged: bool = False
    note: str = ""  # who flipped it and why, shown in every suppression


@dataclass(frozen=True, slots=True)
class IdempotencyState:
    acted: Stamps = field(default_factory=dict)  # incident id -> let through at


@dataclass(frozen=True, slots=True)
class DedupState:
    seen: Stamps = field(default_factory=dict)  # "action ns/target" -> let through at


@dataclass(frozen=True, slots=True)
class CooldownState:
    last: Stamps = field(default_factory=dict)  # target or workload key -> last action at


@dataclass(frozen=True, slots=True)
class BlastRadiusState:
    deletions: tuple[tuple[str, float], ...] = ()  # (workload key, deleted at), oldest first


@dataclass(frozen=True, slots=True)
class RateLimitState:
    tokens: float | None = None  # None: a full bucket, nothing spent yet
    updated_at: float | None = None


@dataclass(frozen=True, slots=True)
class GuardState:
    kill_switch: KillSwitchState = field(default_factory=KillSwitchState)
    idempotency: IdempotencyState = field(default_factory=IdempotencyState)
    dedup: DedupState = field(default_factory=DedupState)
    cooldown: CooldownState = field(default_factory=CooldownState)
    blast_radius: BlastRadiusState = field(default_factory=BlastRadiusState)
    rate_limit: RateLimitState = field(default_factory=RateLimitState)

    def to_json(self) -> str:
        doc = {
            "version": STATE_VERSION,
            "kill_switch": {"engaged": self.kill_switch.engaged, "note": self.kill_switch.note},
            "idempotency": {"acted": dict(self.idempotency.acted)},
            "dedup": {"seen": dict(self.dedup.seen)},
            "cooldown": {"last": dict(self.cooldown.last)},
            "blast_radius": {"deletions": [list(d) for d in self.blast_radius.deletions]},
            "rate_limit": {
                "tokens": self.rate_limit.tokens,
                "updated_at": self.rate_limit.updated_at,
            },
        }
        return json.dumps(doc, sort_keys=True, allow_nan=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> GuardState:
        try:
            doc = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise StateError("$", f"not JSON: {exc}") from exc
        obj = _obj(doc, "$", {f.name for f in fields(cls)} | {"version"})
        if obj.get("version") != STATE_VERSION:
            raise StateError("version", f"expected {STATE_VERSION}, got {obj.get('version')!r}")
        return cls(
            kill_switch=_kill_switch(obj.get("kill_switch", {})),
            idempotency=IdempotencyState(
                _stamps(obj.get("idempotency", {}), "idempotency", "acted")
            ),
            dedup=DedupState(_stamps(obj.get("dedup", {}), "dedup", "seen")),
            cooldown=CooldownState(_stamps(obj.get("cooldown", {}), "cooldown", "last")),
            blast_radius=_blast_radius(obj.get("blast_radius", {})),
            rate_limit=_rate_limit(obj.get("rate_limit", {})),
        )


def with_kill_switch(state: GuardState, engaged: bool, note: str = "") -> GuardState:
    """What the runtime calls when the kill-switch ConfigMap file changes."""
    return replace(state, kill_switch=KillSwitchState(engaged=engaged, note=note))


def prune(stamps: Stamps, now: float, keep_s: float) -> dict[str, float]:
    """Drop entries at least `keep_s` old, so state stays bounded by the window."""
    return {k: at for k, at in stamps.items() if now - at < keep_s}


# --- strict readers: stored state that does not fit is refused, never half-read ---


def _obj(value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StateError(path, f"expected an object, got {type(value).__name__}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise StateError(f"{path}.{unknown[0]}", "unknown key")
    return value


def _num(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StateError(path, f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise StateError(path, "expected a finite number")
    return float(value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise StateError(path, f"expected a string, got {type(value).__name__}")
    return value


def _kill_switch(value: Any) -> KillSwitchState:
    obj = _obj(value, "kill_switch", {"engaged", "note"})
    engaged = obj.get("engaged", False)
    if not isinstance(engaged, bool):
        raise StateError("kill_switch.engaged", f"expected a bool, got {type(engaged).__name__}")
    return KillSwitchState(engaged=engaged, note=_str(obj.get("note", ""), "kill_switch.note"))


def _stamps(value: Any, stage: str, key: str) -> dict[str, float]:
    inner = _obj(value, stage, {key}).get(key, {})
    if not isinstance(inner, dict):
        raise StateError(f"{stage}.{key}", f"expected an object, got {type(inner).__name__}")
    return {k: _num(v, f"{stage}.{key}.{k}") for k, v in inner.items()}


def _blast_radius(value: Any) -> BlastRadiusState:
    obj = _obj(value, "blast_radius", {"deletions"})
    raw = obj.get("deletions", [])
    if not isinstance(raw, list):
        raise StateError("blast_radius.deletions", "expected a list")
    out: list[tuple[str, float]] = []
    for i, item in enumerate(raw):
        path = f"blast_radius.deletions[{i}]"
        if not isinstance(item, list) or len(item) != 2:
            raise StateError(path, "expected [workload, at]")
        out.append((_str(item[0], path), _num(item[1], path)))
    return BlastRadiusState(deletions=tuple(out))


def _rate_limit(value: Any) -> RateLimitState:
    obj = _obj(value, "rate_limit", {"tokens", "updated_at"})
    tokens, updated = obj.get("tokens"), obj.get("updated_at")
    return RateLimitState(
        tokens=None if tokens is None else _num(tokens, "rate_limit.tokens"),
        updated_at=None if updated is None else _num(updated, "rate_limit.updated_at"),
    )
