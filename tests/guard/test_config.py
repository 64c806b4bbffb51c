from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from remediator.contract.errors import ConfigError
from remediator.guard import GuardConfig, parse_guardrails
from remediator.guard.blast_radius import BlastRadiusConfig
from remediator.guard.cooldown import CooldownConfig
from remediator.guard.dedup import DedupConfig
from remediator.guard.dry_run import DryRunConfig
from remediator.guard.kill_switch import KillSwitchConfig
from remediator.guard.min_age import MinAgeConfig
from remediator.guard.rate_limit import RateLimitConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "guardrails.md"


def test_defaults() -> None:
    config = parse_guardrails({})
    assert config == GuardConfig() == parse_guardrails(None)
    windows = (
        config.of("dedup", DedupConfig).window_s,
        config.of("cooldown", CooldownConfig).seconds,
        config.of("min_age", MinAgeConfig).factor,
    )
    assert windows == (300, 0, 1)  # cooldown by simulation
    # caps by simulation (docs/simulation-defaults.md)
    assert config.of("blast_radius", BlastRadiusConfig) == BlastRadiusConfig(20, 50, 600, 50, 1)
    assert config.of("rate_limit", RateLimitConfig) == RateLimitConfig(per_minute=12, burst=3)
    assert not config.of("min_age", MinAgeConfig).stalled  # a stalled pod: judged by its step
    assert not config.of("dry_run", DryRunConfig).enabled
    assert not config.of("kill_switch", KillSwitchConfig).engaged


def test_values_are_read_and_the_rest_defaulted() -> None:
    config = parse_guardrails(
        {
            "kill_switch": {"engaged": True},
            "dedup": {"window_s": 120},
            "blast_radius": {"max_pods": 1, "max_percent": 12.5},
            "rate_limit": None,
        }
    )
    assert config.of("kill_switch", KillSwitchConfig) == KillSwitchConfig(engaged=True)
    assert config.of("dedup", DedupConfig) == DedupConfig(window_s=120.0)
    assert isinstance(config.of("dedup", DedupConfig).window_s, float)
    assert config.of("blast_radius", BlastRadiusConfig) == BlastRadiusConfig(1, 12.5)
    assert config.of("rate_limit", RateLimitConfig) == RateLimitConfig()


@pytest.mark.parametrize(
    ("section", "path", "message"),
    [
        ("dedup: 300", "guardrails.dedup", "expected a mapping, got int 300"),
        ("[dedup]", "guardrails", "expected a mapping, got list"),
        (
            "order: [dedup]",
            "guardrails.order",
            "unknown guardrail; known: kill_switch, idempotency",
        ),
        ("dedupe: {window_s: 1}", "guardrails.dedupe", "unknown guardrail"),
        ("dedup: {window: 1}", "guardrails.dedup.window", "unknown key; known: window_s"),
        ("dedup: {window_s: 5m}", "guardrails.dedup.window_s", "expected a number, got str '5m'"),
        ("dedup: {window_s: true}", "guardrails.dedup.window_s", "expected a number, got bool"),
        ("dedup: {window_s: -1}", "guardrails.dedup.window_s", "must not be negative, got -1"),
        ("dedup: {window_s: .nan}", "guardrails.dedup.window_s", "expected a finite number"),
        ("cooldown: {seconds: -0.5}", "guardrails.cooldown.seconds", "must not be negative"),
        ("min_age: {factor: -1}", "guardrails.min_age.factor", "must not be negative"),
        ("idempotency: {retain_s: -1}", "guardrails.idempotency.retain_s", "must not be negative"),
        (
            "blast_radius: {max_pods: 2.0}",
            "guardrails.blast_radius.max_pods",
            "expected a whole number",
        ),
        ("blast_radius: {max_pods: yes}", "guardrails.blast_radius.max_pods", "got bool True"),
        (
            "blast_radius: {max_pods: -1}",
            "guardrails.blast_radius.max_pods",
            "must not be negative",
        ),
        ("blast_radius: {max_percent: 101}", "guardrails.blast_radius.max_percent", "at most 100"),
        (
            "blast_radius: {max_pods_cluster: -3}",
            "guardrails.blast_radius.max_pods_cluster",
            "negative",
        ),
        ("rate_limit: {burst: 0}", "guardrails.rate_limit.burst", "must not be below 1, got 0"),
        ("rate_limit: {per_minute: 0}", "guardrails.rate_limit.per_minute", "greater than 0"),
        ("rate_limit: {per_minute: '6'}", "guardrails.rate_limit.per_minute", "got str '6'"),
        (
            "dry_run: {enabled: 1}",
            "guardrails.dry_run.enabled",
            "expected true or false, got int 1",
        ),
        (
            "kill_switch: {engaged: 'on'}",
            "guardrails.kill_switch.engaged",
            "expected true or false",
        ),
        ("dedup: {1: 2}", "guardrails.dedup.1", "keys must be strings"),
    ],
)
def test_bad_config_is_refused_with_its_path(section: str, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_guardrails(yaml.safe_load(section))
    assert caught.value.path == path
    assert message in caught.value.message
    assert str(caught.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("dedup: {window_s: 0}", GuardConfig({"dedup": DedupConfig(0)})),
        (
            "blast_radius: {max_percent: 0}",
            GuardConfig({"blast_radius": BlastRadiusConfig(max_percent=0)}),
        ),
        (
            "blast_radius: {max_percent: 100}",
            GuardConfig({"blast_radius": BlastRadiusConfig(max_percent=100)}),
        ),
        (
            "rate_limit: {burst: 1, per_minute: 0.5}",
            GuardConfig({"rate_limit": RateLimitConfig(0.5, 1)}),
        ),
    ],
)
def test_edge_values_are_accepted(section: str, expected: GuardConfig) -> None:
    assert parse_guardrails(yaml.safe_load(section)) == expected


def _doc_example() -> Any:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/guardrails.md has no yaml example"
    return yaml.safe_load(blocks[0])


def test_the_documented_example_parses_to_the_defaults() -> None:
    assert parse_guardrails(_doc_example()["guardrails"]) == GuardConfig()
