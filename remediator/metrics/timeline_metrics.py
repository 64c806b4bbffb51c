"""The cold-start histograms the core observes into, once per phase per pod when the phase
becomes known (and each vLLM step once engine init is over): plain counts
(`histograms`), exposed at scrape time by `export.HistogramCollector`. Compiled with the
core (pyproject.toml [tool.remediator] compiled): it runs on every state change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from prometheus_client import CollectorRegistry

from remediator.metrics.export import HistogramCollector
from remediator.metrics.histograms import HistogramChild, HistogramFamily
from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES, PodTimeline
from remediator.timeline.tracker import StateChange

# Cold starts of large models run from seconds (warm node) to tens of minutes (cold pull).
COLD_START_BUCKETS: Final = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600,
                             900, 1800)  # fmt: skip
_TOTAL_BIT: Final = 1 << len(PHASES)
_PHASE_BITS: Final = _TOTAL_BIT - 1
_ALL_BITS: Final = (_TOTAL_BIT << 1) - 1


class TimelineMetrics:
    """The cold-start histograms, observed as the tracker's changes come; registered on
    `registry` (`HistogramCollector`). `clock`: wall time, for each series' `_created`
    (the runtime that serves the registry passes it; None: no `_created` series)."""

    def __init__(
        self, registry: CollectorRegistry, clock: Callable[[], float] | None = None
    ) -> None:
        self.phase_seconds = HistogramFamily(
            "remediator_cold_start_phase_seconds",
            "Time an inference pod spent in each cold-start phase (total: creation to first "
            "token, else to Ready).",
            ["phase", "model", "namespace"],
            COLD_START_BUCKETS,
            clock,
        )
        self.engine_init = HistogramFamily(
            "vllm_engine_init_duration_seconds",
            "Engine init: main container start to Ready (weights, KV cache, CUDA graphs).",
            ["model", "tp_size", "gpu_util"],
            COLD_START_BUCKETS,
            clock,
        )
        self.engine_step = HistogramFamily(
            "remediator_engine_init_step_seconds",
            "vLLM engine init by its own steps, from the pod's log (weights, torch_compile, "
            "memory_profiling, kv_cache, cuda_graphs, api_server; until_ready: the last "
            "line to Ready).",
            ["step", "model"],
            COLD_START_BUCKETS,
            clock,
        )
        families = (self.phase_seconds, self.engine_init, self.engine_step)
        registry.register(HistogramCollector(*families))
        self._phase_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._step_models: set[str] = set()
        self._step_children: dict[tuple[str, str], HistogramChild] = {}
        self._engine_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._series: set[tuple[str, str, str, str]] = set()  # those _init_series made

    def observe(self, change: StateChange) -> None:
        """Export what this change made known, once per phase per pod."""
        t = change.timeline
        if t.observed == _ALL_BITS:
            return
        model = t.model or "unknown"
        if change.before is None and t.pod_seen:
            self._init_series(model, t)
        if t.observed & _PHASE_BITS != _PHASE_BITS:
            for i, value in enumerate(t.phase_values(t.observed)):
                if value is None:
                    continue  # not known yet, or observed already (left out)
                t.observed |= 1 << i
                phase = PHASES[i]
                self._phase(phase, model, t.namespace).observe(value)
                if phase == "engine_init":
                    self._engine(model, t.tp_size or "", t.gpu_util or "").observe(value)
        if change.after in ("ready", "serving"):
            self.observe_steps(t)
        # Total once the cold start has ended (first token, else Ready).
        if change.after in ("ready", "serving") and not t.observed & _TOTAL_BIT:
            total = t.total()
            if total is not None and (change.after == "serving" or t.first_token is None):
                t.observed |= _TOTAL_BIT
                self._phase("total", model, t.namespace).observe(total)

    def _init_series(self, model: str, t: PodTimeline) -> None:
        """A model's series exist at zero from its first pod on: Prometheus' increase() only
        counts what happens after a series appears, so a first cold start is not lost."""
        key = (model, t.namespace, t.tp_size or "", t.gpu_util or "")
        if key in self._series:
            return  # (once per pod otherwise: eight lookups)
        self._series.add(key)
        for phase in (*PHASES, "total"):
            self._phase(phase, model, t.namespace)
        self._engine(model, t.tp_size or "", t.gpu_util or "")

    def init_steps(self, t: PodTimeline) -> None:
        """Likewise for the engine-init steps, once a pod's log is read."""
        model = t.model or "unknown"
        if model not in self._step_models:
            self._step_models.add(model)
            for step in TIMELINE_STEPS:
                self.engine_step.labels(step, model)

    def observe_steps(self, t: PodTimeline) -> None:
        """Engine-init steps once engine init is over, each once per pod (a log line read
        after Ready still counts)."""
        if t.engine is None or t.ready is None:
            return
        model = t.model or "unknown"
        for step, value in t.engine_steps().items():
            bit = 1 << TIMELINE_STEPS.index(step)
            if not t.engine.exported & bit:
                t.engine.exported |= bit
                self._step(step, model).observe(value)

    def _phase(self, phase: str, model: str, namespace: str) -> HistogramChild:
        # (the children kept by their own key: `labels` takes *args, a tuple per call)
        key = (phase, model, namespace)
        child = self._phase_children.get(key)
        if child is None:
            child = self._phase_children[key] = self.phase_seconds.labels(phase, model, namespace)
        return child

    def _step(self, step: str, model: str) -> HistogramChild:
        key = (step, model)
        child = self._step_children.get(key)
        if child is None:
            child = self._step_children[key] = self.engine_step.labels(step, model)
        return child

    def _engine(self, model: str, tp: str, util: str) -> HistogramChild:
        key = (model, tp, util)
        child = self._engine_children.get(key)
        if child is None:
            child = self._engine_children[key] = self.engine_init.labels(model, tp, util)
        return child
