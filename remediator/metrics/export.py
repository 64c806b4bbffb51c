"""Prometheus export of the timelines (prometheus-client).

Histograms are observed once per phase per pod, when the phase becomes known; the
per-state gauges and per-pod elapsed times are computed at scrape time from the
tracker, so the hot path pays nothing for them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES, SKEW_THRESHOLD_S, UNFINISHED, PodTimeline
from remediator.timeline.tracker import StateChange, Tracker

# Cold starts of large models run from seconds (warm node) to tens of minutes (cold pull).
COLD_START_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800)
_TOTAL_BIT = 1 << len(PHASES)
_PHASE_BITS = _TOTAL_BIT - 1
_ALL_BITS = (_TOTAL_BIT << 1) - 1


class BisectHistogram(Histogram):
    """prometheus-client's Histogram, its bucket found by bisection: the stock `observe`
    scans the buckets in Python (about 1 µs of its 2 at 19 buckets, and the core observes
    ~14 times per cold start). Same buckets, sum, locks and exposition (tests compare)."""

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        if exemplar or amount != amount:  # (NaN: the stock code's answer, whatever it is)
            super().observe(amount, exemplar)
            return
        self._raise_if_not_observable()  # type: ignore[no-untyped-call]
        self._sum.inc(amount)
        # The first bucket whose bound is >= amount, as the scan finds it (the last is +Inf).
        self._buckets[bisect_left(self._upper_bounds, amount)].inc(1)


class TimelineMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.phase_seconds = BisectHistogram(
            "remediator_cold_start_phase_seconds",
            "Time an inference pod spent in each cold-start phase (total: creation to first "
            "token, else to Ready).",
            ["phase", "model", "namespace"],
            buckets=COLD_START_BUCKETS,
            registry=registry,
        )
        self.engine_init = BisectHistogram(
            "vllm_engine_init_duration_seconds",
            "Engine init: main container start to Ready (weights, KV cache, CUDA graphs).",
            ["model", "tp_size", "gpu_util"],
            buckets=COLD_START_BUCKETS,
            registry=registry,
        )
        self.engine_step = BisectHistogram(
            "remediator_engine_init_step_seconds",
            "vLLM engine init by its own steps, from the pod's log (weights, torch_compile, "
            "memory_profiling, kv_cache, cuda_graphs, api_server; until_ready: the last "
            "line to Ready).",
            ["step", "model"],
            buckets=COLD_START_BUCKETS,
            registry=registry,
        )
        self._phase_children: dict[tuple[str, str, str], Histogram] = {}
        self._step_models: set[str] = set()
        self._step_children: dict[tuple[str, str], Histogram] = {}
        self._engine_children: dict[tuple[str, str, str], Histogram] = {}
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

    def _phase(self, phase: str, model: str, namespace: str) -> Histogram:
        # prometheus-client's labels() validates and locks on every call: keep the children.
        key = (phase, model, namespace)
        child = self._phase_children.get(key)
        if child is None:
            child = self._phase_children[key] = self.phase_seconds.labels(phase, model, namespace)
        return child

    def _step(self, step: str, model: str) -> Histogram:
        key = (step, model)
        child = self._step_children.get(key)
        if child is None:
            child = self._step_children[key] = self.engine_step.labels(step, model)
        return child

    def _engine(self, model: str, tp: str, util: str) -> Histogram:
        key = (model, tp, util)
        child = self._engine_children.get(key)
        if child is None:
            child = self._engine_children[key] = self.engine_init.labels(model, tp, util)
        return child


class TrackerCollector(Collector):
    """Gauges read off the tracker at scrape time; off several (`of_many`: a Kafka worker's
    partitions, each a tracker with its own clock), summed."""

    def __init__(self, tracker: Tracker, now: Callable[[], float]) -> None:
        self._views: Callable[[], Iterable[tuple[Tracker, float]]] = lambda: [(tracker, now())]

    @classmethod
    def of_many(cls, views: Callable[[], Iterable[tuple[Tracker, float]]]) -> TrackerCollector:
        """`views`: each tracker and its clock's time, at scrape time."""
        collector = cls.__new__(cls)
        collector._views = views
        return collector

    def collect(self) -> Iterable[Metric]:
        views = list(self._views())
        pods = GaugeMetricFamily(
            "remediator_pods_in_phase",
            "Pods tracked, by namespace and current cold-start state.",
            labels=["namespace", "phase"],
        )
        counts: dict[tuple[str, str], int] = {}
        for tracker, _ in views:
            for key, n in tracker.in_state.items():
                counts[key] = counts.get(key, 0) + n
        for (ns, state), n in sorted(counts.items()):
            pods.add_metric([ns, state], n)
        yield pods
        elapsed = GaugeMetricFamily(
            "remediator_pod_phase_elapsed_seconds",
            "Seconds an unfinished pod has spent in its current phase (for alerting).",
            labels=["namespace", "pod", "phase", "model"],
        )
        skew: dict[str, float] = {}
        for tracker, now in views:
            for t in tracker:
                _add_elapsed(elapsed, t, now)
                s = t.clock_skew() if t.node and t.state() != "deleted" else 0.0
                if s and abs(s) > abs(skew.get(t.node or "", 0.0)):
                    skew[t.node or ""] = s
        yield elapsed
        clocks = GaugeMetricFamily(
            "remediator_node_clock_skew_seconds",
            "How far a node's kubelet clock runs ahead of the API server's (negative: "
            f"behind), where it is proven beyond {SKEW_THRESHOLD_S:g} s; node times are "
            "moved onto the API server's clock for the phases.",
            labels=["node"],
        )
        for node, seconds in sorted(skew.items()):
            clocks.add_metric([node], seconds)
        yield clocks
        yield GaugeMetricFamily(
            "remediator_unwatched_pods",
            "Pods tracked that only webhooks told of (never seen by the watch).",
            value=sum(tracker.unwatched for tracker, _ in views),
        )
        yield CounterMetricFamily(
            "remediator_unwatched_pods_dropped",
            "Pods known from webhooks alone forgotten, oldest first, to stay within "
            "--max-webhook-pods.",
            value=sum(tracker.unwatched_dropped for tracker, _ in views),
        )


def _add_elapsed(family: GaugeMetricFamily, t: PodTimeline, now: float) -> None:
    state = t.state()
    if state not in UNFINISHED:
        return
    since = t.state_since()
    if since is not None:
        family.add_metric([t.namespace, t.name, state, t.model or "unknown"], max(0.0, now - since))
