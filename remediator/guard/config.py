"""The `guardrails:` section of the policy file, parsed strictly.

One frozen dataclass per stage, with the defaults an SRE gets by saying nothing.
Unknown keys, wrong types and out-of-range numbers are refused with the dotted
path of the offending key, so the loader can point at the line. The stage order
is fixed (see `pipeline.ORDER`), so there is deliberately no `order` key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from remediator.policy.errors import ConfigError

# Bounds live next to each field: min (inclusive), gt (exclusive), max (inclusive).
_NON_NEGATIVE = {"min": 0}


@dataclass(frozen=True, slots=True)
class KillSwitchConfig:
    engaged: bool = False  # pins the switch on from the policy file; the runtime flips state


@dataclass(frozen=True, slots=True)
class DryRunConfig:
    enabled: bool = False


@dataclass(frozen=True, slots=True)
class IdempotencyConfig:
    retain_s: float = field(default=86400.0, metadata=_NON_NEGATIVE)  # how long an id is remembered


@dataclass(frozen=True, slots=True)
class DedupConfig:
    window_s: float = field(default=300.0, metadata=_NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class CooldownConfig:
    # 30 s by simulation (docs/simulation-defaults.md): a replacement slow the same way is
    # the policy engine's kill-loop hold now, and 600 s left a workload's second hung pod
    # waiting ten minutes.
    seconds: float = field(default=30.0, metadata=_NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class MinAgeConfig:
    factor: float = field(default=1.0, metadata=_NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class BlastRadiusConfig:
    max_pods: int = field(default=5, metadata=_NON_NEGATIVE)  # by simulation; 25% still caps
    max_percent: float = field(default=25.0, metadata={"min": 0, "max": 100})
    window_s: float = field(default=600.0, metadata=_NON_NEGATIVE)
    max_pods_cluster: int = field(default=20, metadata=_NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class RateLimitConfig:
    per_minute: float = field(default=6.0, metadata={"gt": 0})
    burst: int = field(default=3, metadata={"min": 1})  # 0 would silently stop everything


@dataclass(frozen=True, slots=True)
class GuardConfig:
    kill_switch: KillSwitchConfig = field(default_factory=KillSwitchConfig)
    dry_run: DryRunConfig = field(default_factory=DryRunConfig)
    idempotency: IdempotencyConfig = field(default_factory=IdempotencyConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    cooldown: CooldownConfig = field(default_factory=CooldownConfig)
    min_age: MinAgeConfig = field(default_factory=MinAgeConfig)
    blast_radius: BlastRadiusConfig = field(default_factory=BlastRadiusConfig)
    rate_limit: RateLimitConfig = field(default_factory=RateLimitConfig)


# Stage name (as in the policy file and in `suppressed` output) -> its config record.
STAGE_CONFIGS: dict[str, type[Any]] = {
    "kill_switch": KillSwitchConfig,
    "dry_run": DryRunConfig,
    "idempotency": IdempotencyConfig,
    "dedup": DedupConfig,
    "cooldown": CooldownConfig,
    "min_age": MinAgeConfig,
    "blast_radius": BlastRadiusConfig,
    "rate_limit": RateLimitConfig,
}


def parse_guard_config(mapping: Mapping[str, Any] | None) -> GuardConfig:
    """`mapping` is the value of `guardrails:`; None (an empty section) means defaults."""
    if mapping is None:
        return GuardConfig()
    section = _mapping(mapping, "guardrails")
    stages: dict[str, Any] = {}
    for stage, value in section.items():
        if stage not in STAGE_CONFIGS:
            raise ConfigError(
                f"guardrails.{stage}", f"unknown guardrail; known: {_names(STAGE_CONFIGS)}"
            )
        stages[stage] = _parse_stage(STAGE_CONFIGS[stage], value, f"guardrails.{stage}")
    return GuardConfig(**stages)


def _parse_stage(cls: type[Any], value: Any, path: str) -> Any:
    if value is None:  # `dedup:` with nothing under it
        return cls()
    obj = _mapping(value, path)
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, raw in obj.items():
        if key not in known:
            raise ConfigError(f"{path}.{key}", f"unknown key; known: {_names(known)}")
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


def _names(known: Mapping[str, Any]) -> str:
    return ", ".join(known)


def _show(raw: Any) -> str:
    return f"{type(raw).__name__} {raw!r}"[:80]
