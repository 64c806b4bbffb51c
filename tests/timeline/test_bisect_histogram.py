"""The exporter's histogram (bucket found by bisection) exposes exactly what prometheus-client's
own Histogram does for the same observations: bounds themselves, below the first, past the
last, negatives, infinities and NaN included."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from remediator.metrics.export import COLD_START_BUCKETS, BisectHistogram

EDGES = [float(b) for b in COLD_START_BUCKETS] + [0.0, -1.0, 0.5, 1800.5, math.inf, -math.inf]
VALUES = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, width=64))


def _exposition(kind: type[Histogram], values: list[float]) -> list[str]:
    registry = CollectorRegistry()
    h = kind("h_seconds", "help", ["phase"], buckets=COLD_START_BUCKETS, registry=registry)
    for i, v in enumerate(values):
        h.labels("a" if i % 3 else "b").observe(v)
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if "_created" not in line]  # (wall clock)


@given(st.lists(VALUES, max_size=40))
def test_the_same_samples_as_the_stock_histogram(values: list[float]) -> None:
    assert _exposition(BisectHistogram, values) == _exposition(Histogram, values)


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    lines = _exposition(BisectHistogram, [60.0])
    assert 'h_seconds_bucket{le="45.0",phase="b"} 0.0' in lines
    assert 'h_seconds_bucket{le="60.0",phase="b"} 1.0' in lines
