"""The verdict on windows of the real H200 trace, aligned with the phase marks of
the processes that made it (write weights, then load, warm up, steady, burst, free)."""

from __future__ import annotations

import pytest

from remediator.steps.gpu_memory import Thresholds, Verdict, decide
from remediator.steps.smi_parse import parse_recording
from tests.steps.trace import TRACE_COLUMNS, phases, trace_lines

START = phases("start")
WRITE = phases("write")


def judge(start: float, end: float, spread: float = 256, rise: float | None = None) -> Verdict:
    lines = trace_lines(start, end)
    assert len(lines) >= 8, "window too small to mean anything"
    parsed = parse_recording("\n".join(lines), TRACE_COLUMNS.split(","))
    assert not parsed.errors
    return decide(parsed.samples, Thresholds.from_spread(spread, rise))


def codes(v: Verdict) -> set[str]:
    return {r.code for g in v.gpus for r in g.reasons}


def test_writer_peak_is_unstable() -> None:
    # process 1 materialises the weights on the GPU (27.7 GiB peak), then frees it
    v = judge(WRITE["import_transformers"], WRITE["save_safetensors"] + 2)
    assert v.status == "unstable"
    assert v.gpus[0].max_mib is not None and v.gpus[0].max_mib > 27_000
    assert "spread" in codes(v)


def test_weight_load_is_unstable() -> None:
    v = judge(START["cuda_context"], START["first_forward_prefill_eager"])
    assert v.status == "unstable"
    assert {"spread", "rising"} <= codes(v)
    assert v.gpus[0].last_mib is not None and v.gpus[0].last_mib > 14_000


def test_warmup_drift_is_not_settled_although_inside_the_spread() -> None:
    # 14535 -> 14611 MiB over ~6 s: within a 128 MiB spread, but still climbing
    window = (START["load_weights_to_gpu"], START["generate_1_token_eager"] + 4)
    v = judge(*window, spread=128)
    assert v.status == "unstable"
    assert codes(v) == {"rising"}
    assert v.gpus[0].rise_mib == v.gpus[0].spread_mib == 76
    # with room for that drift, the same window passes: the thresholds decide
    assert judge(*window, spread=256).status == "stable"


def test_steady_stretch_during_compile_is_stable() -> None:
    v = judge(START["generate_1_token_eager"] + 5, START["generate_16_static_cache"] - 2, 64)
    assert v.status == "stable"
    assert v.gpus[0].spread_mib == 0 and v.gpus[0].min_mib == 14611
    assert v.gpus[0].readings > 100


def test_steady_4s_phase_is_stable() -> None:
    v = judge(START["generate_16_static_cache"], START["steady_4s"], 64)
    assert v.status == "stable"
    assert v.gpus[0].min_mib == v.gpus[0].max_mib == 14771


@pytest.mark.parametrize("spread", [256, 4096, 8000])
def test_8gib_burst_is_unstable(spread: float) -> None:
    v = judge(START["steady_4s"] - 1, START["free_burst"] + 0.5, spread)
    assert v.status == "unstable"
    assert "spread" in codes(v)
    spread_seen = v.gpus[0].spread_mib
    assert spread_seen is not None and spread_seen >= 8192


def test_free_and_exit_is_unstable() -> None:
    v = judge(START["end"] - 1, START["end"] + 5)
    assert v.status == "unstable"
    assert v.gpus[0].last_mib == 0 and "spread" in codes(v)


def test_idle_gpu_before_anything_is_stable() -> None:
    v = judge(WRITE["import_torch"] - 8, WRITE["import_torch"] + 5, 64)
    assert v.status == "stable" and v.gpus[0].max_mib == 0
