"""The `guardrails:` section of the policy file, parsed strictly.

Each stage declares its own frozen `Config` dataclass (in the stage's file), with the
defaults an SRE gets by saying nothing and the bounds next to each field. This module
parses any such dataclass: unknown keys, wrong types and out-of-range numbers are
refused with the dotted path of the offending key, so the loader can point at the line.
The stage order is fixed (the pipeline as built), so there is deliberately no `order` key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from remediator.contract.errors import ConfigError

C = TypeVar("C")

# Bounds live next to each field: min (inclusive), gt (exclusive), max (inclusive).
NON_NEGATIVE = {"min": 0}


class GuardConfig:
    """Stage name -> that stage's config. A stage at its defaults is not stored, so a
    section that spells out the defaults equals an empty one."""

    __slots__ = ("_stages",)

    def __init__(self, stages: Mapping[str, Any] | None = None) -> None:
        self._stages = {k: c for k, c in (stages or {}).items() if c != type(c)()}

    def of(self, stage: str, kind: type[C]) -> C:
        found = self._stages.get(stage)
        return found if found is not None else kind()

    def with_stage(self, stage: str, config: Any) -> GuardConfig:
        return GuardConfig({**self._stages, stage: config})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GuardConfig) and self._stages == other._stages

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"GuardConfig({self._stages!r})"


def parse_guard_config(
    mapping: Mapping[str, Any] | None, known: Mapping[str, type[Any]]
) -> GuardConfig:
    """`mapping` is the value of `guardrails:` (None: an empty section, the defaults);
    `known` is stage name -> its Config type, in pipeline order."""
    if mapping is None:
        return GuardConfig()
    section = _mapping(mapping, "guardrails")
    stages: dict[str, Any] = {}
    for stage, value in section.items():
        if stage not in known:
            raise ConfigError(
                f"guardrails.{stage}", f"unknown guardrail; known: {', '.join(known)}"
            )
        stages[stage] = parse_section(known[stage], value, f"guardrails.{stage}")
    return GuardConfig(stages)


def parse_section(cls: type[C], value: Any, path: str) -> C:
    if value is None:  # `dedup:` with nothing under it
        return cls()
    obj = _mapping(value, path)
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for key, raw in obj.items():
        if key not in known:
            raise ConfigError(f"{path}.{key}", f"unknown key; known: {', '.join(known)}")
        f = known[key]
        kwargs[key] = _value(raw, f.default, dict(f.metadata), f"{path}.{key}")
    return cls(**kwargs)


def _value(raw: Any, default: Any, bounds: dict[str, float], path: str) -> Any:
    if isinstance(default, bool):
        if not isinstance(raw, bool):
            raise ConfigError(path, f"expected true or false, got {_show(raw)}")
        return raw
    if isinstance(default, int):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ConfigError(path, f"expected a whole number, got {_show(raw)}")
        value: float = raw
    else:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ConfigError(path, f"expected a number, got {_show(raw)}")
        if not math.isfinite(raw):
            raise ConfigError(path, f"expected a finite number, got {raw!r}")
        value = float(raw)
    _check_bounds(value, bounds, path)
    return value


def _check_bounds(value: float, bounds: dict[str, float], path: str) -> None:
    if "min" in bounds and value < bounds["min"]:
        word = "negative" if bounds["min"] == 0 else f"below {bounds['min']:g}"
        raise ConfigError(path, f"must not be {word}, got {value:g}")
    if "gt" in bounds and value <= bounds["gt"]:
        raise ConfigError(path, f"must be greater than {bounds['gt']:g}, got {value:g}")
    if "max" in bounds and value > bounds["max"]:
        raise ConfigError(path, f"must be at most {bounds['max']:g}, got {value:g}")


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(path, f"expected a mapping, got {_show(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(f"{path}.{key}", "keys must be strings")
    return value


def _show(raw: Any) -> str:
    return f"{type(raw).__name__} {raw!r}"[:80]
