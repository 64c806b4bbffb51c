"""Has GPU memory settled? A pure decision over nvidia-smi samples: no I/O, no clock.

A GPU is stable over a window when every sample saw it with a valid reading, its
identity (UUID) and size (memory.total) held, memory.used moved by at most
`max_spread_mib` (max - min), and the window does not end more than `max_rise_mib`
above where it began (a slow warm-up drift can stay inside the spread and still
not be settled). Anything we cannot prove stable is unstable, with the reasons.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Status = Literal["stable", "unstable"]
OverallStatus = Literal["stable", "unstable", "error"]


@dataclass(frozen=True, slots=True)
class Reading:
    """One GPU's line in one nvidia-smi sample. An unreadable value ("[N/A]") is NaN."""

    index: int
    used_mib: float
    total_mib: float
    uuid: str | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """One nvidia-smi invocation (or one `-lms` round): a reading per GPU it saw."""

    readings: tuple[Reading, ...]
    at: str | None = None  # the timestamp nvidia-smi printed, or when we sampled


@dataclass(frozen=True, slots=True)
class Thresholds:
    max_spread_mib: float
    max_rise_mib: float
    min_samples: int = 2

    @staticmethod
    def from_spread(max_spread_mib: float, max_rise_mib: float | None = None) -> Thresholds:
        """The default rise budget is half the spread: a window may wobble by M but
        may not end more than M/2 above where it started."""
        rise = max_spread_mib / 2 if max_rise_mib is None else max_rise_mib
        return Thresholds(max_spread_mib=max_spread_mib, max_rise_mib=rise)


@dataclass(frozen=True, slots=True)
class Reason:
    code: str  # missing | invalid_reading | too_few_samples | identity_changed | ...
    detail: str


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    index: int
    uuid: str | None
    status: Status
    reasons: tuple[Reason, ...]
    readings: int  # valid readings the statistics below are over
    min_mib: float | None
    max_mib: float | None
    first_mib: float | None
    last_mib: float | None
    total_mib: float | None

    @property
    def spread_mib(self) -> float | None:
        if self.min_mib is None or self.max_mib is None:
            return None
        return self.max_mib - self.min_mib

    @property
    def rise_mib(self) -> float | None:
        if self.first_mib is None or self.last_mib is None:
            return None
        return self.last_mib - self.first_mib


@dataclass(frozen=True, slots=True)
class Verdict:
    status: OverallStatus
    gpus: tuple[GpuVerdict, ...]
    samples: int
    reasons: tuple[Reason, ...]


def _valid(r: Reading) -> bool:
    finite = math.isfinite(r.used_mib) and math.isfinite(r.total_mib)
    return finite and r.total_mib > 0 and 0 <= r.used_mib <= r.total_mib


def _presence_reasons(index: int, seen: Sequence[Reading | None]) -> list[Reason]:
    reasons: list[Reason] = []
    present = sum(r is not None for r in seen)
    if present < len(seen):
        reasons.append(Reason("missing", f"GPU {index} in {present} of {len(seen)} samples"))
    bad = [r for r in seen if r is not None and not _valid(r)]
    if bad:
        reasons.append(
            Reason(
                "invalid_reading",
                f"{len(bad)} unreadable or impossible reading(s), e.g. "
                f"used={bad[0].used_mib} total={bad[0].total_mib}",
            )
        )
    return reasons


def _identity_reasons(readings: Sequence[Reading]) -> list[Reason]:
    reasons: list[Reason] = []
    uuids = {r.uuid for r in readings if r.uuid is not None}
    if len(uuids) > 1:
        reasons.append(Reason("identity_changed", f"UUIDs seen: {', '.join(sorted(uuids))}"))
    totals = {r.total_mib for r in readings}
    if len(totals) > 1:
        reasons.append(Reason("total_changed", f"memory.total seen: {sorted(totals)} MiB"))
    return reasons


def _movement_reasons(used: Sequence[float], t: Thresholds) -> list[Reason]:
    reasons: list[Reason] = []
    spread = max(used) - min(used)
    if spread > t.max_spread_mib:
        reasons.append(
            Reason("spread", f"memory.used moved {spread:g} MiB > {t.max_spread_mib:g} MiB")
        )
    rise = used[-1] - used[0]
    if rise > t.max_rise_mib:
        reasons.append(
            Reason("rising", f"window ends {rise:g} MiB above its start > {t.max_rise_mib:g} MiB")
        )
    return reasons


def decide_gpu(index: int, seen: Sequence[Reading | None], t: Thresholds) -> GpuVerdict:
    """One GPU's verdict; `seen` has one entry per sample, None where it was absent."""
    reasons = _presence_reasons(index, seen)
    valid = [r for r in seen if r is not None and _valid(r)]
    if len(valid) < t.min_samples:
        reasons.append(
            Reason("too_few_samples", f"{len(valid)} valid reading(s), need {t.min_samples}")
        )
    reasons += _identity_reasons(valid)
    used = [r.used_mib for r in valid]
    if used:
        reasons += _movement_reasons(used, t)
    uuid = next((r.uuid for r in valid if r.uuid), None)
    return GpuVerdict(
        index=index,
        uuid=uuid,
        status="unstable" if reasons else "stable",
        reasons=tuple(reasons),
        readings=len(valid),
        min_mib=min(used) if used else None,
        max_mib=max(used) if used else None,
        first_mib=used[0] if used else None,
        last_mib=used[-1] if used else None,
        total_mib=valid[-1].total_mib if valid else None,
    )


def _by_gpu(samples: Sequence[Sample]) -> dict[int, list[Reading | None]]:
    """Per GPU index, its reading in each sample (None where absent). If a sample
    lists an index twice, the last line wins; parsers split samples before that."""
    indices = sorted({r.index for s in samples for r in s.readings})
    table: dict[int, list[Reading | None]] = {i: [None] * len(samples) for i in indices}
    for n, sample in enumerate(samples):
        for r in sample.readings:
            table[r.index][n] = r
    return table


def decide(samples: Sequence[Sample], t: Thresholds, input_errors: Iterable[str] = ()) -> Verdict:
    """The window's verdict. `input_errors` are lines the parser could not read:
    with any, or with no GPU at all, the answer is "error" (not "unstable"), since
    a tooling fault must not cordon a node."""
    gpus = tuple(decide_gpu(i, seen, t) for i, seen in _by_gpu(samples).items())
    reasons: list[Reason] = []
    errors = list(input_errors)
    if errors:
        reasons.append(Reason("input_errors", f"{len(errors)} unreadable line(s): {errors[0]}"))
    if not gpus:
        reasons.append(Reason("no_gpus", f"no GPU reading in {len(samples)} sample(s)"))
    status: OverallStatus
    if reasons:
        status = "error"
    elif all(g.status == "stable" for g in gpus):
        status = "stable"
    else:
        status = "unstable"
        bad = [str(g.index) for g in gpus if g.status != "stable"]
        reasons.append(Reason("unstable_gpus", f"GPU(s) {', '.join(bad)} not settled"))
    return Verdict(status=status, gpus=gpus, samples=len(samples), reasons=tuple(reasons))
