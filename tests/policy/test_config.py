"""The policy file: defaults, and refusals that name the line and the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from remediator.contract.errors import ConfigError
from remediator.policy_file import PolicyFile, load_policy, load_policy_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"


def test_empty_file_is_the_default_policy() -> None:
    assert load_policy("") == PolicyFile()
    cfg = load_policy("").rules
    assert cfg.stuck_pod.budgets["engine_init"] == 60.0 and cfg.stuck_pod.checks == 3
    assert cfg.stuck_pod.adaptive.min_siblings == 1 and cfg.stuck_pod.expected_cold_start_s == 600
    assert cfg.stuck_pod.selector.matches({"app": "vllm-inference"})
    assert cfg.gpu_memory.cordon is True  # by simulation; guardrails.cordon_cap caps it
    assert load_policy("").dry_run is False


def test_partial_budgets_keep_the_other_defaults() -> None:
    cfg = load_policy("stuck_pod:\n  budgets:\n    engine_init: 300\n").rules
    assert cfg.stuck_pod.budgets == {
        "scheduling": 600.0,
        "init": 1800.0,
        "image_pull": 900.0,
        "container_start": 300.0,
        "engine_init": 300.0,
    }


def test_whole_numbers_stay_whole() -> None:
    """Counts are read as ints: the core compiled by mypyc refuses a float for an int field
    (its int parser once returned a float, which pure Python let by)."""
    text = "stuck_pod:\n  checks: 2\n  adaptive: {window: 20, min_samples: 4}\n"
    cfg = load_policy(text).rules.stuck_pod
    got = (cfg.checks, cfg.adaptive.window, cfg.adaptive.min_samples)
    assert got == (2, 20, 4) and all(type(n) is int for n in got)


def test_a_model_s_own_expected_cold_start_is_read_beside_its_budgets() -> None:
    text = "stuck_pod:\n  models:\n    m: {engine_init: 300, expected_cold_start_s: 420}\n"
    cfg = load_policy(text).rules.stuck_pod
    assert cfg.models == {"m": {"engine_init": 300.0, "expected_cold_start_s": 420.0}}


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("stuck_pod:\n  budgets:\n    engine_init: -5\n", 3, "stuck_pod.budgets.engine_init"),
        ("stuck_pod:\n  budgets:\n    warmup: 5\n", 3, "unknown phase"),
        ("stuck_pod:\n  models:\n    m: {warmup: 5}\n", 3, "stuck_pod.models.m.warmup"),
        (
            "stuck_pod:\n  models:\n    m: {expected_cold_start_s: 0}\n",
            3,
            "stuck_pod.models.m.expected_cold_start_s",
        ),  # fmt: skip
        ("stuck_pod:\n  selector: 'app in (a'\n", 2, "bad label selector"),
        ("stuck_pod:\n  selector: 'app=$(x)'\n", 2, "invalid label value"),
        ("\n\nstuck_pod:\n  bogus: 1\n", 4, "unknown key"),
        ("verify: {}\n", 1, "unknown section"),
        ("guardrails:\n  cooldown:\n    seconds: -1\n", 3, "must not be negative"),
        ("guardrails:\n  blast_radius:\n    max_pods: 1.5\n", 3, "whole number"),
        ("image_update:\n  enabled: yes please\n", 2, "true or false"),
        ("stuck_pod: [1, 2\n", 2, "not valid YAML"),
    ],
)
def test_bad_policy_is_refused_with_line_and_reason(text: str, line: int, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_policy(text)
    assert err.value.line == line
    assert says in str(err.value)


def test_the_example_policy_in_the_readme_loads() -> None:
    cfg = load_policy_file(EXAMPLE)
    assert cfg.rules.stuck_pod.namespaces


def test_replay_refuses_a_bad_policy_file_at_start(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("stuck_pod:\n  checks: 0\n")
    events = tmp_path / "e.jsonl"
    events.write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "remediator", "replay", "--policy", str(bad), str(events)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "line 2" in proc.stderr and "stuck_pod.checks" in proc.stderr
