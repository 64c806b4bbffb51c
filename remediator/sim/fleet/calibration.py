"""Phase durations of a 70B TP=2 vLLM cold start, calibrated to measured figures.

Untuned (issue 2's production cluster, means): image pull 182 s, container start 94 s,
engine init 236 s. Tuned (pre-pulled layers, cached weights, CUDA graphs captured
ahead): image pull 21 s and engine init 32 s at their P95, cold start total P95 53 s.
Each phase is log-normal (durations are positive and right-skewed), set by its mean and
coefficient of variation; `tests/sim/test_fleet_calibration.py` checks samples against
these figures.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist

PHASES = ("scheduling", "image_pull", "container_start", "engine_init", "first_token")


@dataclass(frozen=True, slots=True)
class Phase:
    mean: float
    cv: float  # standard deviation / mean

    @property
    def mu_sigma(self) -> tuple[float, float]:
        sigma2 = math.log1p(self.cv * self.cv)
        return math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2)

    def p(self, q: float) -> float:
        """The q-quantile (0 < q < 1) of this log-normal."""
        mu, sigma = self.mu_sigma
        return math.exp(mu + sigma * _z(q))


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    scheduling: Phase
    image_pull: Phase
    container_start: Phase
    engine_init: Phase
    first_token: Phase  # Ready to the first token answered
    # What the calibration promises, checked by the tests.
    targets: tuple[tuple[str, str, float], ...]  # (phase or "total", "mean" | "p95", seconds)

    def phase(self, name: str) -> Phase:
        p: Phase = getattr(self, name)
        return p


class Sampler:
    """Draws phase durations; one per profile and seed, so runs are reproducible."""

    def __init__(self, profile: Profile, rng: random.Random) -> None:
        self._rng = rng
        self._params = {name: profile.phase(name).mu_sigma for name in PHASES}

    def draw(self, phase: str) -> float:
        mu, sigma = self._params[phase]
        return self._rng.lognormvariate(mu, sigma)


UNTUNED = Profile(
    name="untuned",
    scheduling=Phase(2.0, 0.5),
    image_pull=Phase(182.0, 0.19),
    container_start=Phase(94.0, 0.16),
    engine_init=Phase(236.0, 0.17),
    first_token=Phase(4.0, 0.3),
    targets=(
        ("image_pull", "mean", 182.0),
        ("container_start", "mean", 94.0),
        ("engine_init", "mean", 236.0),
    ),
)
TUNED = Profile(
    name="tuned",
    scheduling=Phase(1.0, 0.5),
    image_pull=Phase(15.7, 0.19),  # P95 21 s
    container_start=Phase(3.0, 0.3),
    engine_init=Phase(24.8, 0.165),  # P95 32 s
    first_token=Phase(1.5, 0.3),
    targets=(
        ("image_pull", "p95", 21.0),
        ("engine_init", "p95", 32.0),
        ("total", "p95", 53.0),
    ),
)
PROFILES = {p.name: p for p in (UNTUNED, TUNED)}

# ---- engine init, step by step ---------------------------------------------------------------
# What each vLLM engine-init step took in the public start-up logs of tests/data/vllm_logs
# (38 logs, vLLM 0.4 to 0.27, provenance and sha256 in its README): per log and step, the
# seconds vLLM reported for the step where its line reports them (weights, torch.compile,
# graph capture, V0's memory profiling), else the seconds between the step's lines as
# tests/data/vllm_logs/expected.toml gives them, when over zero. The logs are different models
# on different GPUs, so their spread is not one fleet's: only the medians are used, as each
# step's share of engine init (`STEP_SHARES`); `tests/sim/test_fleet_calibration.py` derives
# these figures again from the data and checks them. Logs added since (`calibrated = false`
# in expected.toml: partial excerpts of 0.2x releases, which would add a few weights,
# compile and profiling figures) are not in them: taking them in moves every simulated
# figure and the defaults chosen on them.
STEP_SECONDS: dict[str, tuple[float, ...]] = {
    "weights": (0.902026, 2.195456, 15.434767, 23.10753, 27.200487, 114.953146),
    "torch_compile": (0.06, 3.7, 7.51, 14.73, 19.37, 19.69, 28.77, 45.81, 47.72),
    "memory_profiling": (
        0.44,
        0.66,
        0.91,
        1.0,
        1.0,
        1.0,
        1.0,
        1.16,
        2.0,
        3.0,
        7.0,
        12.0,
        17.59,
        34.26,
    ),  # fmt: skip
    "kv_cache": (2.0, 2.0, 3.0, 3.0, 4.0, 44.0),
    "cuda_graphs": (1.0, 2.0, 7.0, 14.0, 14.0, 15.0, 15.0, 17.0, 32.0, 37.0, 38.0),
}
# Before the first step line, two stretches that no line's figure measures: the container's
# start to the engine's banner ("Initializing a V1 LLM engine ...": Python's imports of torch
# and vLLM, the engine's config), and the banner to "Starting to load model" (the workers'
# start and NCCL init, where vLLM logs no step). No public log here shows a container's start:
# 5 s for the imports and config is an estimate. NCCL init: 2024-08-v0.5.4-ray-405b.log, NCCL's
# lines at 10:27:36 and the load begun at 10:27:40 (2024-05-v0.4.2-kv-cache.log, TP 1: its
# banner and the weights in within a second).
ENGINE_START_S = 5.0
NCCL_INIT_S = 4.0
# The engine-ready line to the API server's (2025-06-v1-api-server.log: 11:03:55 → 11:03:56),
# the one log that shows both.
API_SERVER_S = 1.0
# From the last line to Ready: the readiness probe (the simulated pods' periodSeconds 5, see
# kube.py), half a period on average.
UNTIL_READY_S = 2.5
# How much one step varies from one cold start of a model to the next, beside the others
# (log-normal sigma of its share, before the shares are scaled back to the pod's engine init):
# the logs cannot say (each is another setup); 0.3 makes a step vary more than the whole
# phase does (cv 0.17), as a sum of steps does.
STEP_SIGMA = 0.3


def _median(values: tuple[float, ...]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def step_shares() -> tuple[tuple[str, float], ...]:
    """Each stretch of a V1 engine's init that a log line ends, with its share of the phase.
    A V1 engine logs nothing between sizing its KV cache and ending graph capture, so the
    cache's allocation is counted in cuda_graphs (as the core counts it). `engine_start` ends
    with the banner, `nccl_init` with "Starting to load model", `weights` (vLLM's own figure
    for the load alone) with the weights line."""
    m = {step: _median(v) for step, v in STEP_SECONDS.items()}
    stretches = (
        ("engine_start", ENGINE_START_S),
        ("nccl_init", NCCL_INIT_S),
        ("weights", m["weights"]),
        ("torch_compile", m["torch_compile"]),
        ("memory_profiling", m["memory_profiling"]),
        ("cuda_graphs", m["kv_cache"] + m["cuda_graphs"]),
        ("api_server", API_SERVER_S),
        ("until_ready", UNTIL_READY_S),
    )
    total = sum(s for _, s in stretches)
    return tuple((step, s / total) for step, s in stretches)


STEP_SHARES = step_shares()
# Where an engine init hangs (issue 20), by the stretch it hangs in: NCCL's communicator init
# (the log stops at the engine's banner, before "Starting to load model": as in vLLM issues
# 8058, 12292, 6370), torch.compile, and CUDA graph capture (after the KV cache is sized).
# Public reports give no frequencies; each is equally likely.
HANG_STEPS = ("nccl_init", "torch_compile", "cuda_graphs")


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)
