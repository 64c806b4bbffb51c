"""The fleet simulator against its own calibration: sampled phases match the figures."""

from __future__ import annotations

import tomllib
from pathlib import Path
from statistics import mean

import pytest

from remediator.sim.fleet.calibration import (
    PROFILES,
    STEP_SECONDS,
    STEP_SHARES,
    TUNED,
    UNTUNED,
    Profile,
)
from remediator.sim.fleet.controllers import NoRemediation
from remediator.sim.fleet.draws import PodDraws, mix, params
from remediator.sim.fleet.scenario import DeploymentSpec, Scenario
from remediator.sim.fleet.simulation import Simulation
from remediator.sim.fleet.steps import LOGGED, hang_lines, line_offsets

N = 20_000
DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_logs"


def _samples(profile: Profile) -> dict[str, list[float]]:
    p = params(profile)
    out: dict[str, list[float]] = {k: [] for k in ("image_pull", "container_start",
                                                    "engine_init", "total")}  # fmt: skip
    for i in range(N):
        d = PodDraws(mix(7, i), p)
        phases = {"scheduling": d.phase("scheduling", 10), "image_pull": d.phase("image_pull", 20),
                  "container_start": d.phase("container_start", 40),
                  "engine_init": d.phase("engine_init", 50)}  # fmt: skip
        for k in ("image_pull", "container_start", "engine_init"):
            out[k].append(phases[k])
        out["total"].append(sum(phases.values()))
    return out


def _p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * len(values))]


@pytest.mark.parametrize("profile", [TUNED, UNTUNED], ids=lambda p: p.name)
def test_sampled_phases_match_the_calibration(profile: Profile) -> None:
    samples = _samples(profile)
    for phase, stat, target in profile.targets:
        got = mean(samples[phase]) if stat == "mean" else _p95(samples[phase])
        assert got == pytest.approx(target, rel=0.03), (phase, stat, got, target)


def test_the_untuned_figures_are_the_measured_means() -> None:
    targets = {(p, s): v for p, s, v in UNTUNED.targets}
    assert targets == {("image_pull", "mean"): 182.0, ("container_start", "mean"): 94.0,
                       ("engine_init", "mean"): 236.0}  # fmt: skip
    assert {(p, s): v for p, s, v in TUNED.targets} == {
        ("image_pull", "p95"): 21.0,
        ("engine_init", "p95"): 32.0,
        ("total", "p95"): 53.0,
    }
    assert set(PROFILES) == {"tuned", "untuned"}


@pytest.mark.parametrize("profile", ["tuned", "untuned"])
def test_engine_init_in_the_simulated_cluster_keeps_its_calibration(profile: str) -> None:
    """End to end: started → Ready as the simulated pods live it (no hangs, no caching in
    that phase), measured on the pods themselves."""
    spans: list[float] = []

    def watch(what: str, now: float, obj: object) -> None:
        if what == "ready":
            spans.append(now - obj.started)  # type: ignore[attr-defined]

    scenario = Scenario(
        name="cal", profile=profile, duration_s=600, seeds=(3,), node_count=200, gpus_per_node=8,
        deployments=(DeploymentSpec("vllm-a", "meta-llama/Llama-3.1-70B-Instruct", 600),),
    )  # fmt: skip
    Simulation(scenario, 3, NoRemediation(), observer=watch).run()
    assert len(spans) == 600
    want = PROFILES[profile].engine_init
    assert mean(spans) == pytest.approx(want.mean, rel=0.05)


# ---- engine init, step by step --------------------------------------------------------------
def _logged_step_seconds() -> dict[str, list[float]]:
    """Per step, one figure per public log: what vLLM reported for the step where its line
    says, else the seconds between the step's lines (expected.toml), when over zero."""
    table = tomllib.loads((DATA / "expected.toml").read_text(encoding="utf-8"))
    out: dict[str, list[float]] = {}
    for entry in table.values():
        if not entry.get("calibrated", True):
            continue  # came after the calibration: taking it in moves every simulated figure
        reported: dict[str, float] = {}
        for mark in entry["marks"]:
            parts = [p.strip() for p in mark.split("|")]
            if len(parts) > 1 and parts[1] != "-":
                reported[parts[0]] = max(reported.get(parts[0], 0.0), float(parts[1]))
        for step in STEP_SECONDS:
            seconds = reported.get(step, entry["steps"].get(step))
            if seconds is not None and seconds > 0:
                out.setdefault(step, []).append(seconds)
    return out


def test_step_seconds_are_what_the_public_logs_give() -> None:
    got = _logged_step_seconds()
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in STEP_SECONDS.items()}
    shares = dict(STEP_SHARES)
    assert sum(shares.values()) == pytest.approx(1.0)
    # the medians: weights and torch.compile ~19 s each, KV cache + graph capture 18 s
    assert shares["weights"] == pytest.approx(shares["torch_compile"], rel=0.02)
    assert shares["memory_profiling"] < shares["api_server"] * 1.2


@pytest.mark.parametrize("profile", [TUNED, UNTUNED], ids=lambda p: p.name)
def test_step_lines_split_engine_init_by_the_logged_shares(profile: Profile) -> None:
    p = params(profile)
    per_step: dict[str, list[float]] = {step: [] for step in LOGGED}
    for i in range(N // 10):
        d = PodDraws(mix(11, i), p)
        init = d.phase("engine_init", 50)
        offsets = line_offsets(d, init)
        assert len(offsets) == len(LOGGED)
        assert list(offsets) == sorted(offsets) and 0 < offsets[-1] < init
        for k, step in enumerate(LOGGED):
            per_step[step].append((offsets[k] - (offsets[k - 1] if k else 0.0)) / init)
    shares = dict(STEP_SHARES)
    assert mean(per_step["weights"]) == pytest.approx(shares["weights"], rel=0.1)
    assert mean(per_step["cuda_graphs"]) == pytest.approx(shares["cuda_graphs"], rel=0.1)
    assert max(per_step["torch_compile_started"]) == 0.0  # printed as the weights are in
    before_first = mean(per_step["engine_started"]) + mean(per_step["weights_started"])
    assert before_first == pytest.approx(shares["engine_start"] + shares["nccl_init"], rel=0.1)


def test_a_hung_engine_logs_the_steps_before_its_hang() -> None:
    counts = [hang_lines(u / 100) for u in range(1, 100)]
    assert {LOGGED[n] if n < len(LOGGED) else None for n in counts} == {
        "weights_started",  # NCCL init: the banner only, no step line (as vLLM)
        "torch_compile",  # the load's start, the weights' line and the compile's start
        "cuda_graphs",  # and the compile's and memory profiling's ends
    }
    assert LOGGED[0] == "engine_started"
    assert abs(counts.count(1) - counts.count(4)) <= 1
