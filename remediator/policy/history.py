"""What recent cold starts of each model took: the ground for adaptive budgets."""

from __future__ import annotations

import math
from collections import deque

from remediator.policy.config import StuckPodConfig


class PhaseHistory:
    """The last `window` completed durations per (model, phase); `total` included."""

    def __init__(self, window: int) -> None:
        self._window = window
        self._samples: dict[tuple[str, str], deque[float]] = {}
        self._p99: dict[tuple[str, str], float] = {}  # until the next sample of that key
        self._sorted: dict[tuple[str, str], list[float]] = {}  # likewise, the samples sorted

    def add(self, model: str, phase: str, seconds: float) -> None:
        key = (model, phase)
        samples = self._samples.get(key)
        if samples is None:
            samples = self._samples[key] = deque(maxlen=self._window)
        samples.append(seconds)
        self._p99.pop(key, None)
        self._sorted.pop(key, None)

    def share_within(self, model: str, phase: str, seconds: float) -> tuple[int, float]:
        """How many samples there are, and the share of them no longer than `seconds`."""
        samples = self._samples.get((model, phase))
        if not samples:
            return 0, 0.0
        return len(samples), sum(1 for v in samples if v <= seconds) / len(samples)

    def count(self, model: str, phase: str) -> int:
        samples = self._samples.get((model, phase))
        return len(samples) if samples else 0

    def quantile(self, model: str, phase: str, q: float, min_samples: int) -> float | None:
        """The `q` quantile of the samples (nearest rank), once there are `min_samples`."""
        key = (model, phase)
        samples = self._samples.get(key)
        if samples is None or len(samples) < min_samples:
            return None
        ordered = self._sorted.get(key)
        if ordered is None:
            ordered = self._sorted[key] = sorted(samples)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def p99(self, model: str, phase: str, min_samples: int) -> float | None:
        key = (model, phase)
        samples = self._samples.get(key)
        if samples is None or len(samples) < min_samples:
            return None
        p99 = self._p99.get(key)
        if p99 is None:
            ordered = sorted(samples)
            p99 = self._p99[key] = ordered[
                min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)
            ]
        return p99


def step_key(step: str) -> str:
    """The history key of one vLLM engine-init step's durations (beside the phases')."""
    key = _STEP_KEYS.get(step)
    return key if key is not None else f"step:{step}"


_STEP_KEYS: dict[str, str] = {}  # (filled below: the keys the policy asks for per line)


def budget(
    cfg: StuckPodConfig, history: PhaseHistory, model: str | None, phase: str
) -> tuple[float, str]:
    """Seconds a pod of `model` may spend in `phase`, and how that figure was set."""
    static = cfg.budgets[phase]
    how = "static"
    if model is not None and phase in cfg.models.get(model, {}):
        static, how = cfg.models[model][phase], f"set for {model}"
    if cfg.adaptive.enabled and model is not None:
        p99 = history.p99(model, phase, cfg.adaptive.min_samples)
        if p99 is not None and cfg.adaptive.factor * p99 > static:
            return cfg.adaptive.factor * p99, f"adaptive {cfg.adaptive.factor:g}×P99 of {model}"
    return static, how


def expected_cold_start(cfg: StuckPodConfig, history: PhaseHistory, model: str | None) -> float:
    """What a cold start of this model takes: P99 of its recent totals, else the default."""
    if model is not None:
        p99 = history.p99(model, "total", cfg.adaptive.min_siblings)
        if p99 is not None:
            return p99
    return cfg.expected_cold_start_s


for _step in (
    "weights", "torch_compile", "memory_profiling", "kv_cache", "cuda_graphs", "api_server",
    "until_ready", "torch_compile_missed", "before_first_step",
):  # fmt: skip
    _STEP_KEYS[_step] = f"step:{_step}"
