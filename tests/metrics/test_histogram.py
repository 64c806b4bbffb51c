"""The core's lock-free histogram exposes exactly what prometheus-client's Histogram does."""

from __future__ import annotations

import math

import prometheus_client
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from remediator.metrics.export import COLD_START_BUCKETS
from remediator.metrics.histogram import Histogram

LABELS = st.tuples(st.sampled_from(["weights", "kv_cache"]), st.sampled_from(["a/b", 'q"x']))
VALUES = st.one_of(
    st.floats(min_value=0, max_value=5000, allow_nan=False),
    st.sampled_from([*COLD_START_BUCKETS, 0.0, math.inf, math.nan]),
)


def _exposition(observations: list[tuple[tuple[str, str], float]], ours: bool) -> list[str]:
    registry = CollectorRegistry()
    kind = Histogram if ours else prometheus_client.Histogram
    h = kind("x_seconds", "help", ["step", "model"], buckets=COLD_START_BUCKETS, registry=registry)
    for labels, value in observations:
        h.labels(*labels).observe(value)
    lines = generate_latest(registry).decode().splitlines()
    return [line for line in lines if "_created" not in line]  # a clock reading each


@given(st.lists(st.tuples(LABELS, VALUES), max_size=40))
def test_the_same_exposition_as_prometheus_client(obs: list[tuple[tuple[str, str], float]]) -> None:
    ours, theirs = _exposition(obs, True), _exposition(obs, False)
    assert ours == theirs


def test_created_series_as_prometheus_client_writes_them() -> None:
    registry = CollectorRegistry()
    Histogram("y_seconds", "help", ["a"], buckets=(1, 2), registry=registry).labels("1")
    text = generate_latest(registry).decode()
    assert 'y_seconds_created{a="1"}' in text
    assert 'y_seconds_bucket{a="1",le="+Inf"} 0.0' in text
    assert registry.get_sample_value("y_seconds_count", {"a": "1"}) == 0.0
