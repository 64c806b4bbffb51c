"""Properties of the pure verdict and the parser, over arbitrary inputs."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from remediator.steps.gpu_memory import Reading, Sample, Thresholds, decide
from remediator.steps.smi_parse import parse_recording

anything = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**40), 2**40)
readings = st.builds(
    Reading,
    index=st.integers(0, 7),
    used_mib=anything,
    total_mib=anything,
    uuid=st.sampled_from([None, "GPU-a", "GPU-b"]),
)
samples = st.lists(
    st.builds(Sample, readings=st.lists(readings, max_size=9).map(tuple)), max_size=12
)
thresholds = st.builds(
    Thresholds,
    max_spread_mib=st.floats(0, 1e6),
    max_rise_mib=st.floats(0, 1e6),
    min_samples=st.integers(1, 5),
)


@given(samples, thresholds)
def test_never_crashes_and_says_why(window: list[Sample], t: Thresholds) -> None:
    v = decide(window, t)
    assert v.status in ("stable", "unstable", "error")
    assert v.samples == len(window)
    for g in v.gpus:
        assert (g.status == "stable") == (not g.reasons)
        if g.spread_mib is not None:
            assert g.spread_mib >= 0
    assert (v.status == "stable") == (bool(v.gpus) and all(g.status == "stable" for g in v.gpus))
    if v.status != "stable":
        assert v.reasons


@st.composite
def clean_window(draw: st.DrawFn) -> tuple[list[Sample], int]:
    """Every GPU in every sample, valid, same UUID and total, used within [base, base+M].
    Whole MiB, as nvidia-smi prints them (so base + offset is exact)."""
    spread = draw(st.integers(0, 4096))
    gpus = draw(st.integers(1, 8))
    n = draw(st.integers(2, 12))
    base = [draw(st.integers(0, 100_000)) for _ in range(gpus)]
    total = 143771.0 + 4096
    window = [
        Sample(
            readings=tuple(
                Reading(i, float(base[i] + draw(st.integers(0, spread))), total, f"GPU-{i}")
                for i in range(gpus)
            )
        )
        for _ in range(n)
    ]
    return window, spread


@given(clean_window())
def test_spread_within_m_is_stable_when_nothing_else_is_wrong(
    case: tuple[list[Sample], int],
) -> None:
    window, spread = case
    v = decide(window, Thresholds(max_spread_mib=spread, max_rise_mib=spread))
    assert v.status == "stable", v


@given(clean_window())
def test_the_default_rise_budget_is_half_the_spread(case: tuple[list[Sample], int]) -> None:
    window, spread = case
    v = decide(window, Thresholds.from_spread(spread))
    for g in v.gpus:
        assert g.rise_mib is not None
        assert (g.status == "stable") == (g.rise_mib <= spread / 2)


@given(clean_window(), st.floats(1, 1e5), st.integers(0, 11))
def test_one_reading_outside_the_band_is_unstable(
    case: tuple[list[Sample], int], jump: float, at: int
) -> None:
    window, spread = case
    at %= len(window)
    first = window[at].readings[0]
    top = max(s.readings[0].used_mib for s in window)
    high = Reading(first.index, top + spread + jump, first.total_mib + 1e6, first.uuid)
    total_fixed = [
        Sample(
            tuple(Reading(r.index, r.used_mib, first.total_mib + 1e6, r.uuid) for r in s.readings)
        )
        for s in window
    ]
    total_fixed[at] = Sample((high, *total_fixed[at].readings[1:]))
    v = decide(total_fixed, Thresholds(max_spread_mib=spread, max_rise_mib=math.inf))
    assert v.status == "unstable"
    assert "spread" in {r.code for r in v.gpus[0].reasons}


@given(st.text())
def test_parser_never_crashes_on_any_text(text: str) -> None:
    parsed = parse_recording(text)
    for e in parsed.errors:
        assert str(e).startswith(f"line {e.line}: ")
    decide(parsed.samples, Thresholds.from_spread(256), [str(e) for e in parsed.errors])
