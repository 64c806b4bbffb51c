"""The verify-gpu-memory step: get samples (live or recorded), decide, shape the verdict."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from remediator.steps.errors import StepError
from remediator.steps.gpu_memory import GpuVerdict, Sample, Thresholds, Verdict, decide
from remediator.steps.report import ExitCode, log
from remediator.steps.smi_parse import ParseError, parse_recording
from remediator.steps.smi_sampler import SamplerError, sample

DEFAULT_SAMPLES = 10
MAX_ERRORS_SHOWN = 20
_EXIT = {"stable": ExitCode.OK, "unstable": ExitCode.UNSTABLE, "error": ExitCode.ERROR}


def _recorded(
    path: Path, columns: str, last: int | None
) -> tuple[tuple[Sample, ...], tuple[ParseError, ...]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise StepError(ExitCode.ERROR, "unreadable_file", f"{path}: {e}") from e
    parsed = parse_recording(text, tuple(c.strip() for c in columns.split(",")))
    samples = parsed.samples[-last:] if last else parsed.samples
    return samples, parsed.errors


def _live(
    nvidia_smi: str, count: int, interval: float
) -> tuple[tuple[Sample, ...], tuple[ParseError, ...]]:
    def on_sample(n: int, s: Sample) -> None:
        log("sample", n=n + 1, of=count, used_mib={r.index: r.used_mib for r in s.readings})

    try:
        got = sample(nvidia_smi, count, interval, time.sleep, on_sample)
    except SamplerError as e:
        raise StepError(ExitCode.ERROR, "nvidia_smi_failed", str(e)) from e
    return got.samples, got.errors


def _gpu_json(g: GpuVerdict) -> dict[str, Any]:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "status": g.status,
        "reasons": [{"code": r.code, "detail": r.detail} for r in g.reasons],
        "readings": g.readings,
        "min_mib": g.min_mib,
        "max_mib": g.max_mib,
        "first_mib": g.first_mib,
        "last_mib": g.last_mib,
        "spread_mib": g.spread_mib,
        "rise_mib": g.rise_mib,
        "total_mib": g.total_mib,
    }


def verdict_json(v: Verdict, t: Thresholds, errors: tuple[ParseError, ...]) -> dict[str, Any]:
    return {
        "outcome": v.status,
        "stable": v.status == "stable",
        "samples": v.samples,
        "thresholds": {"max_spread_mib": t.max_spread_mib, "max_rise_mib": t.max_rise_mib},
        "reasons": [{"code": r.code, "detail": r.detail} for r in v.reasons],
        "gpus": [_gpu_json(g) for g in v.gpus],
        "input_errors": [str(e) for e in errors[:MAX_ERRORS_SHOWN]],
        "input_errors_total": len(errors),
    }


def run_verify(
    samples: int | None,
    interval: float,
    max_spread_mib: float,
    max_rise_mib: float | None,
    from_file: Path | None,
    columns: str,
    nvidia_smi: str,
) -> tuple[ExitCode, dict[str, Any]]:
    t = Thresholds.from_spread(max_spread_mib, max_rise_mib)
    if from_file is not None:
        got, errors = _recorded(from_file, columns, samples)
        source = f"file:{from_file}"
    else:
        got, errors = _live(nvidia_smi, samples or DEFAULT_SAMPLES, interval)
        source = f"{nvidia_smi} every {interval:g} s"
    v = decide(got, t, [str(e) for e in errors])
    for g in v.gpus:
        log("gpu", gpu=g.index, status=g.status, reasons=[r.code for r in g.reasons])
    return _EXIT[v.status], {"source": source, **verdict_json(v, t, errors)}
