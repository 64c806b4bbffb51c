"""What recent cold starts of each model took: the ground for adaptive budgets."""

from __future__ import annotations

import math
from collections import deque
from typing import Final

from remediator.policy.config import MODEL_COLD_START, AdaptiveConfig, StuckPodConfig


class PhaseHistory:
    """The last `window` completed durations per (model, phase); `total` included."""

    def __init__(self, window: int) -> None:
        self._window = window
        # model -> phase -> its samples: keyed by string twice, not by a (model, phase) tuple
        # (a tuple is hashed and compared item by item on every look; the policy looks several
        # times per log line, a fifth of the history's cost in the simulator with the core)
        self._by_model: dict[str, dict[str, _Samples]] = {}
        self._models_of: dict[str, list[str]] = {}  # phase -> its models, first learned first
        self.changes = 0  # samples added so far: whether anything was learned since a look

    def _of(self, model: str, phase: str) -> _Samples | None:
        phases = self._by_model.get(model)
        return phases.get(phase) if phases is not None else None

    def add(self, model: str, phase: str, seconds: float) -> None:
        phases = self._by_model.get(model)
        if phases is None:
            phases = self._by_model[model] = {}
        samples = phases.get(phase)
        if samples is None:
            samples = phases[phase] = _Samples(self._window)
            self._models_of.setdefault(phase, []).append(model)
        samples.add(seconds)
        self.changes += 1

    def share_within(self, model: str, phase: str, seconds: float) -> tuple[int, float]:
        """How many samples there are, and the share of them no longer than `seconds`."""
        samples = self._of(model, phase)
        if samples is None or not samples.values:
            return 0, 0.0
        values = samples.values
        return len(values), sum(1 for v in values if v <= seconds) / len(values)

    @property
    def window(self) -> int:
        return self._window

    def count(self, model: str, phase: str) -> int:
        samples = self._of(model, phase)
        return len(samples.values) if samples is not None else 0

    def recent(self, model: str, phase: str, n: int) -> list[float]:
        """The last `n` samples, oldest first."""
        samples = self._of(model, phase)
        return list(samples.values)[-n:] if samples is not None else []

    def samples(self) -> dict[tuple[str, str], list[float]]:
        """Every (model, phase)'s samples, oldest first (a copy)."""
        return {
            (model, phase): list(samples.values)
            for model, phases in self._by_model.items()
            for phase, samples in phases.items()
        }

    def models(self, phase: str) -> list[str]:
        """Every model (or other key: policy.pace's nodes) with samples of `phase`."""
        return list(self._models_of.get(phase, ()))

    def margin(self, model: str, phase: str) -> float:
        """How much wider a limit set from these samples is made (`few_samples_margin`)."""
        return few_samples_margin(self.count(model, phase), self._window)

    def quantile(self, model: str, phase: str, q: float, min_samples: int) -> float | None:
        """The `q` quantile of the samples (nearest rank), once there are `min_samples`."""
        samples = self._of(model, phase)
        if samples is None or len(samples.values) < min_samples:
            return None
        return samples.quantile(q)

    def p99(self, model: str, phase: str, min_samples: int) -> float | None:
        samples = self._of(model, phase)
        if samples is None or len(samples.values) < min_samples:
            return None
        return samples.quantile(0.99)


class _Samples:
    """One (model, phase)'s last samples, and their order until the next one comes."""

    __slots__ = ("values", "_ordered")

    def __init__(self, window: int) -> None:
        self.values: deque[float] = deque(maxlen=window)
        self._ordered: list[float] | None = None

    def add(self, seconds: float) -> None:
        self.values.append(seconds)
        self._ordered = None

    def quantile(self, q: float) -> float:
        """Nearest rank (the samples are not empty)."""
        ordered = self._ordered
        if ordered is None:
            ordered = self._ordered = sorted(self.values)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# A quantile of few samples understates the tail it stands for: with 5 siblings the P95
# (nearest rank) is their slowest, and a healthy start went past twice that, plus the checks,
# 15-20 times as often as past twice the P95 of a full window of 50 (Monte Carlo over the
# simulator's step and phase spreads: 0.06-0.07% against 0.004% per step judged). A limit
# set from n samples is widened by 1 + FEW_SAMPLES × (1/n - 1/window): 1.54 at 5, 1.24 at 10,
# 1.09 at 20, none from a full window, which brings every n to about a full window's rate.
# Found by random fleets: an untuned first-wave pod deleted 0.4 s before its compile ended,
# 146 s against 2x its 6 siblings' P95 of 63 s.
FEW_SAMPLES: Final = 3.0


def few_samples_margin(samples: int, window: int) -> float:
    """How much wider a limit set from a quantile of `samples` durations (of at most
    `window`) is made."""
    return 1.0 + FEW_SAMPLES * max(0.0, 1.0 / max(1, samples) - 1.0 / max(1, window))


def step_key(step: str) -> str:
    """The history key of one vLLM engine-init step's durations (beside the phases')."""
    key = _STEP_KEYS.get(step)
    return key if key is not None else f"step:{step}"


_STEP_KEYS: Final[dict[str, str]] = {}  # (filled below: the keys the policy asks for per line)


def budget(
    cfg: StuckPodConfig,
    history: PhaseHistory,
    model: str | None,
    phase: str,
    unlearned: bool = True,
) -> tuple[float, str]:
    """Seconds a pod of `model` may spend in `phase`, and how that figure was set.

    With adaptive budgets on, a phase the model's pods have not yet gone through often
    enough to learn from (fewer than `min_samples`), and no budget set for the model, gets
    at least the model's whole expected cold start: the static budgets are the seed's
    (engine init 60 s, as for a tuned 8B), and until then only `min_age` stood between
    them and a slow model's first wave, which it stops guarding once earlier phases ate the
    expected time (a slow registry: a 70B fleet's first pods reached engine init older
    than 600 s and were deleted 80 s into a healthy 240 s init). No phase takes longer
    than the whole; what a phase really takes is learned from its first pods. Learned, the
    budget is the larger of the static one and `factor` × the P99; for the phases in
    `adaptive.lower` (container start), the learned one even where smaller, down to
    `adaptive.lower_floor_s`.
    `unlearned` False: without that floor (the soonest the pod could be judged, should
    its siblings' first cold starts come in meanwhile: the policy's timers arm on it)."""
    static = cfg.budgets[phase]
    how = "static"
    if model is not None and phase in cfg.models.get(model, {}):
        static, how = cfg.models[model][phase], f"set for {model}"
    if not cfg.adaptive.enabled:
        return static, how
    p99 = None if model is None else history.p99(model, phase, cfg.adaptive.min_samples)
    if p99 is not None:
        assert model is not None
        factor = cfg.adaptive.factor * history.margin(model, phase)
        learned = factor * p99
        if learned > static:
            return learned, f"adaptive {factor:.3g}×P99 of {model}"
        if how == "static" and phase in cfg.adaptive.lower:  # a model's own budget stands
            return _lowered(cfg.adaptive, learned, static, f"{factor:.3g}×P99 of {model}")
        return static, how
    if how == "static" and unlearned:
        whole = expected_cold_start(cfg, history, model)
        if whole > static:
            return whole, f"no history of {phase} for {model or 'this pod'} yet: a whole cold start"
    return static, how


def _lowered(cfg: AdaptiveConfig, learned: float, static: float, what: str) -> tuple[float, str]:
    """A learned budget under the static one, held at the floor (`AdaptiveConfig.lower`)."""
    if learned >= cfg.lower_floor_s:
        return learned, f"adaptive {what}, under the static {static:.0f}s"
    if cfg.lower_floor_s < static:
        return cfg.lower_floor_s, f"the adaptive floor: {what} is {learned:.0f}s"
    return static, "static"


def expected_cold_start(cfg: StuckPodConfig, history: PhaseHistory, model: str | None) -> float:
    """What a cold start of this model takes: P99 of its recent totals, else what the policy
    says for the model (`models.<model>.expected_cold_start_s`), else the default."""
    if model is None:
        return cfg.expected_cold_start_s
    p99 = history.p99(model, "total", cfg.adaptive.min_siblings)
    if p99 is not None:
        return p99
    return cfg.models.get(model, {}).get(MODEL_COLD_START, cfg.expected_cold_start_s)


for _step in (
    "weights", "torch_compile", "memory_profiling", "kv_cache", "cuda_graphs", "api_server",
    "until_ready", "torch_compile_missed", "before_first_step", "to_banner",
):  # fmt: skip
    _STEP_KEYS[_step] = f"step:{_step}"
