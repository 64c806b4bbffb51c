"""A Prometheus histogram for the core's hot path: the same series and exposition as
prometheus-client's `Histogram` (buckets, _count, _sum, _created), observed without locks.

prometheus-client takes a lock per value it increments and walks the bucket bounds on every
observation; the tracker observes a few phases per pod change, from one thread. Here an
observation is a bisection and two plain increments; a scrape (another thread) reads the
counts as they are, which can show one observation in its bucket before its sum, as
prometheus-client's separate locks can too.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Iterable, Sequence

import prometheus_client.metrics
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class Series:
    """One labelled series: its bucket counts (not cumulative), sum and creation time."""

    __slots__ = ("counts", "sum", "created", "_bounds")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        self.sum += amount
        if amount == amount:  # NaN is in no bucket (nor the count), as the library has it
            self.counts[bisect_left(self._bounds, amount)] += 1


class Histogram(Collector):
    """`prometheus_client.Histogram(name, doc, labelnames, buckets=..., registry=...)`,
    labelled series only."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name, self._doc, self._labelnames = name, documentation, tuple(labelnames)
        bounds = sorted(float(b) for b in buckets)
        if bounds[-1] != math.inf:
            bounds.append(math.inf)
        self._bounds = tuple(bounds)
        self._le = tuple(str(floatToGoString(b)) for b in bounds)  # type: ignore[no-untyped-call]
        self._series: dict[tuple[str, ...], Series] = {}
        registry.register(self)

    def labels(self, *values: str) -> Series:
        key = tuple(str(v) for v in values)
        if len(key) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {key}")
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = Series(self._bounds)
        return series

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._doc, "histogram")]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self._name, self._doc, "histogram")
        created = prometheus_client.metrics._use_created  # disable_created_metrics() honoured
        for key, series in list(self._series.items()):
            labels = dict(zip(self._labelnames, key, strict=True))
            acc = 0
            for le, count in zip(self._le, list(series.counts), strict=True):
                acc += count
                metric.add_sample(f"{self._name}_bucket", {**labels, "le": le}, acc)
            metric.add_sample(f"{self._name}_count", labels, acc)
            metric.add_sample(f"{self._name}_sum", labels, series.sum)
            if created:
                metric.add_sample(f"{self._name}_created", labels, series.created)
        return [metric]
