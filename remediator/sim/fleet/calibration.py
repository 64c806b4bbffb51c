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


def _z(q: float) -> float:
    return NormalDist().inv_cdf(q)
