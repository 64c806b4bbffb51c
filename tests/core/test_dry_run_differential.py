"""The dry-run differential (issue 18's done-criterion): on every recorded stream in
tests/data and on the simulator's fleets, the dry run's "would" list equals the live
run's acted list (action, target, time), through one `Session` and through the embedded
runtime's driver and outbox restarted mid-stream on its state file."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from remediator.guard.dry_run import DryRun, DryRunConfig
from remediator.policy_file import PolicyFile, load_policy, load_policy_file
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from tests.core.differential import (
    Feed,
    Step,
    acting,
    file_stream,
    record_fleet,
    through_driver,
    through_session,
)
from tests.policy.conftest import Run

ROOT = Path(__file__).resolve().parents[2]
# Every recorded stream: tests/data's, and the examples' (a morning on a 70B fleet).
STREAMS = sorted((ROOT / "tests" / "data").rglob("*.jsonl")) + sorted(
    (ROOT / "examples").glob("*.jsonl")
)
# Tight enough that the recordings' slow pods are acted on (the default waits them out).
TIGHT = """
stuck_pod: {budgets: {engine_init: 20, container_start: 20, image_pull: 20}, checks: 1}
guardrails: {min_age: {factor: 0}}
"""
POLICIES = {
    "default": PolicyFile(),
    "tight": load_policy(TIGHT),
    "seed-rule": load_policy_file(ROOT / "remediator" / "sim" / "policies" / "seed-rule.yaml"),
}


def _dry(config: PolicyFile) -> PolicyFile:
    """The same policy with `guardrails.dry_run.enabled`."""
    dry = config.guardrails.with_stage(DryRun.name, DryRunConfig(enabled=True))
    return replace(config, guardrails=dry)


def _fleet(profile: str) -> Scenario:
    return Scenario(
        name=f"{profile}-diff", profile=profile, duration_s=2 * 3600, seeds=(5,),
        node_count=6, gpus_per_node=8,
        deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 6),
                     DeploymentSpec("vllm-qwen-72b", "Qwen/Qwen2.5-72B-Instruct", 4)),
        scale=ScaleLoad(1200, 4, 10), rollout_every_s=3600,
        faults=Faults(engine_init_hang=0.05),
    )  # fmt: skip


FLEETS = {
    "tuned/default": ("tuned", "default"),
    "untuned/default": ("untuned", "default"),
    "untuned/seed-rule": ("untuned", "seed-rule"),  # kill-loop situations
}


@cache
def _fleet_stream(name: str) -> tuple[tuple[Step, ...], int]:
    profile, policy = FLEETS[name]
    steps, kill_loops = record_fleet(_fleet(profile), 5, POLICIES[policy])
    return tuple(steps), kill_loops


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("path", STREAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_recorded_streams_would_what_live_acts(path: Path, policy: str) -> None:
    steps, config = file_stream(path), POLICIES[policy]
    live = through_session(steps, config)
    dry = through_session(steps, _dry(config))
    assert dry == live


def test_the_recorded_streams_do_act() -> None:
    """The comparison above is not between two empty lists."""
    acted = [
        t for path in STREAMS for t in acting(through_session(file_stream(path), POLICIES["tight"]))
    ]
    assert len(acted) >= 4


@pytest.mark.parametrize("fleet", sorted(FLEETS))
def test_fleets_would_what_live_acts(fleet: str) -> None:
    steps, kill_loops = _fleet_stream(fleet)
    config = POLICIES[FLEETS[fleet][1]]
    live = through_session(list(steps), config)
    dry = through_session(list(steps), _dry(config))
    assert list(acting(live)), "the fleet gave the live run nothing to do"
    assert dry == live
    if fleet == "untuned/seed-rule":  # the kill-loop guard held: told, not deleted again
        assert kill_loops == 0
        assert any("too tight" in reason for reason in _told(steps, _dry(config)))


def _told(steps: tuple[Step, ...], config: PolicyFile) -> list[str]:
    run = Run(config)
    session = run.session
    for step in steps:
        if isinstance(step, Feed):
            session.feed(step.item, run)
        else:
            session.advance(step.now, run)
    return [d.reason for d in run.decisions if d.action == "notify"]


@pytest.mark.parametrize(
    "source", [*sorted(FLEETS), *(str(p.relative_to(ROOT)) for p in STREAMS[:3])]
)
async def test_the_driver_restarted_mid_stream_would_what_live_acts(source: str) -> None:
    if source in FLEETS:
        steps = list(_fleet_stream(source)[0])
        config = POLICIES[FLEETS[source][1]]
    else:
        steps, config = file_stream(ROOT / source), POLICIES["tight"]
    half = len(steps) // 2
    live = await through_driver(steps, config, half)
    dry = await through_driver(steps, _dry(config), half)
    assert dry.through == live.through
    # Each "would" was told once, restart or not: the guard state came back with the rows.
    assert dry.announced == len(list(acting(dry.through)))
