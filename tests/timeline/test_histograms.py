"""The core's histograms (plain counts, `metrics.histograms`, exposed by
`export.HistogramCollector`) expose exactly what prometheus-client's own Histogram does for
the same observations: bounds themselves, below the first, past the last, negatives,
infinities and NaN included, children in the order made."""

from __future__ import annotations

import io
import math

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from remediator.inputs.decode import decode
from remediator.metrics.export import HistogramCollector
from remediator.metrics.histograms import HistogramFamily
from remediator.metrics.timeline_metrics import COLD_START_BUCKETS
from remediator.output import TextOutput
from remediator.session import Session
from tests.timeline.streams import cold_start

EDGES = [float(b) for b in COLD_START_BUCKETS] + [0.0, -1.0, 0.5, 1800.5, math.inf, -math.inf]
VALUES = st.one_of(st.sampled_from(EDGES), st.floats(allow_nan=True, width=64))


def _stock(values: list[float]) -> list[str]:
    registry = CollectorRegistry()
    h = Histogram("h_seconds", "help", ["phase"], buckets=COLD_START_BUCKETS, registry=registry)
    for i, v in enumerate(values):
        h.labels("a" if i % 3 else "b").observe(v)
    return _lines(registry)


def _ours(values: list[float], clock: float = 0.0) -> list[str]:
    registry = CollectorRegistry()
    h = HistogramFamily("h_seconds", "help", ["phase"], COLD_START_BUCKETS, lambda: clock)
    registry.register(HistogramCollector(h))
    for i, v in enumerate(values):
        h.labels("a" if i % 3 else "b").observe(v)
    return _lines(registry)


def _lines(registry: CollectorRegistry, created: bool = False) -> list[str]:
    text = generate_latest(registry).decode()
    return [line for line in text.splitlines() if created or "_created" not in line]


@given(st.lists(VALUES, max_size=40))
def test_the_same_samples_as_the_stock_histogram(values: list[float]) -> None:
    assert _ours(values) == _stock(values)


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    lines = _ours([60.0])
    assert 'h_seconds_bucket{le="45.0",phase="b"} 0.0' in lines
    assert 'h_seconds_bucket{le="60.0",phase="b"} 1.0' in lines


def test_created_is_the_clocks_time_when_the_child_was_made() -> None:
    registry = CollectorRegistry()
    now = [1_700_000_000.0]
    h = HistogramFamily("h_seconds", "help", ["phase"], COLD_START_BUCKETS, lambda: now[0])
    registry.register(HistogramCollector(h))
    h.labels("a").observe(3.0)
    now[0] += 60.0
    h.labels("a").observe(4.0)  # (the child made before stays)
    h.labels("b")
    created = [line for line in _lines(registry, created=True) if "_created{" in line]
    assert created == [
        'h_seconds_created{phase="a"} 1.7e+09',
        'h_seconds_created{phase="b"} 1.70000006e+09',
    ]


def test_a_wrong_number_of_label_values_is_refused() -> None:
    h = HistogramFamily("h_seconds", "help", ["phase", "model"], COLD_START_BUCKETS, lambda: 0.0)
    with pytest.raises(ValueError, match="2 label values wanted, got 1"):
        h.labels("a")


def test_buckets_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="not in order"):
        HistogramFamily("h_seconds", "help", [], (5, 1), lambda: 0.0)


def test_the_created_series_as_the_stock_histogram_writes_them() -> None:
    stock = [line for line in _lines(_registry_of_stock(), created=True) if "_created" in line]
    ours = [line for line in _ours_created() if "_created" in line]
    assert [line.split(" ")[0] for line in ours] == [line.split(" ")[0] for line in stock]


def _registry_of_stock() -> CollectorRegistry:
    registry = CollectorRegistry()
    h = Histogram("h_seconds", "help", ["phase"], buckets=COLD_START_BUCKETS, registry=registry)
    h.labels("b").observe(1.0)
    h.labels("a").observe(2.0)
    return registry


def _ours_created() -> list[str]:
    registry = CollectorRegistry()
    h = HistogramFamily("h_seconds", "help", ["phase"], COLD_START_BUCKETS, lambda: 0.0)
    registry.register(HistogramCollector(h))
    h.labels("b").observe(1.0)
    h.labels("a").observe(2.0)
    return _lines(registry, created=True)


def _session_exposition(wall: float | None) -> str:
    session = Session(wall=(lambda: wall) if wall is not None else None)
    out = TextOutput(io.StringIO())
    for o in cold_start():
        for item in decode(orjson.dumps(o)):
            session.feed(item, out)
    return generate_latest(session.registry).decode()


def test_a_session_with_the_runtimes_wall_clock_writes_created_series() -> None:
    """serve and the Kafka worker pass their wall clock: each series made says when."""
    text = _session_exposition(1_700_000_000.0)
    created = [line for line in text.splitlines() if "_created{" in line]
    assert created and all(line.endswith(" 1.7e+09") for line in created)
    names = {line.split("_created{")[0] for line in created}
    assert names == {
        "remediator_cold_start_phase_seconds",
        "vllm_engine_init_duration_seconds",
    }


def test_a_session_without_one_writes_the_same_counts_and_no_created() -> None:
    with_wall = _session_exposition(1_700_000_000.0).splitlines()
    without = _session_exposition(None).splitlines()
    assert not [line for line in without if "_created" in line]
    assert without == [line for line in with_wall if "_created" not in line]
    assert any(
        line.startswith("remediator_cold_start_phase_seconds_count{") and not line.endswith(" 0.0")
        for line in without
    )


def test_a_registry_refuses_the_same_histograms_twice_as_with_the_stock_one() -> None:
    registry = CollectorRegistry()
    h = HistogramFamily("h_seconds", "help", ["phase"], COLD_START_BUCKETS, None)
    registry.register(HistogramCollector(h))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(HistogramCollector(h))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Histogram("h_seconds", "help", ["phase"], registry=registry)
