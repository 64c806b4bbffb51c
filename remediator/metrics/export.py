"""Prometheus export of the timelines (prometheus-client), at scrape time.

The histograms the core observed into (`timeline_metrics`, plain counts) become
prometheus-client's families here (`HistogramCollector`); the per-state gauges and per-pod
elapsed times are computed from the tracker (`TrackerCollector`), so the hot path pays
nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import metrics as prometheus_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from remediator.metrics.histograms import HistogramFamily
from remediator.timeline.model import SKEW_THRESHOLD_S, UNFINISHED, PodTimeline
from remediator.timeline.tracker import Tracker


class HistogramCollector(Collector):
    """`HistogramFamily`s as prometheus-client exposes its own Histogram: cumulative
    buckets, count, sum and created, per child in the order made."""

    def __init__(self, *families: HistogramFamily) -> None:
        self._families = families

    def describe(self) -> Iterable[Metric]:
        """The names, without samples: a registry refuses a second collector of one of
        them, as it refuses a second Histogram of the same name."""
        for family in self._families:
            yield HistogramMetricFamily(family.name, family.documentation, labels=family.labelnames)

    def collect(self) -> Iterable[Metric]:
        for family in self._families:
            yield _histogram(family)


def _histogram(family: HistogramFamily) -> HistogramMetricFamily:
    names = family.labelnames
    out = HistogramMetricFamily(family.name, family.documentation, labels=names)
    bounds = [floatToGoString(b) for b in family.bounds]  # type: ignore[no-untyped-call]
    for values, child in list(family.children.items()):  # (a copy: the core may add one)
        cumulative, buckets = 0.0, []
        for bound, count in zip(bounds, list(child.counts), strict=True):
            cumulative += count
            buckets.append((bound, cumulative))
        out.add_metric(list(values), buckets, child.sum)
        if child.created is not None and _created_series():
            labels = dict(zip(names, values, strict=True))
            out.samples.append(Sample(f"{family.name}_created", labels, child.created))
    return out


def _created_series() -> bool:
    """Whether prometheus-client writes `_created` series (PROMETHEUS_DISABLE_CREATED_SERIES,
    `disable_created_metrics()`): as its own Histogram would."""
    return bool(getattr(prometheus_metrics, "_use_created", True))


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
