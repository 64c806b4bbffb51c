"""The fleet simulator against its own calibration: sampled phases match the figures."""

from __future__ import annotations

from statistics import mean

import pytest

from remediator.sim.fleet.calibration import PROFILES, TUNED, UNTUNED, Profile
from remediator.sim.fleet.controllers import NoRemediation
from remediator.sim.fleet.draws import PodDraws, mix, params
from remediator.sim.fleet.scenario import DeploymentSpec, Scenario
from remediator.sim.fleet.simulation import Simulation

N = 20_000


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
