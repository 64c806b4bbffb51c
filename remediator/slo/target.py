"""SLO targets (`first_token<60s@99%`) and the share of pods within one, from histogram
buckets. Pure: numbers in, numbers out."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES

KNOWN = (*PHASES, "total")
_TARGET = re.compile(
    r"^\s*(?P<what>[a-z_]+)\s*<\s*(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>ms|s|m|h)?"
    r"\s*@\s*(?P<pct>[0-9]+(?:\.[0-9]+)?)\s*%\s*$"
)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True, slots=True)
class Target:
    """`phase` (a cold-start phase, `total`, or an engine-init step) under `seconds` for at
    least `objective` (a fraction) of pods."""

    phase: str
    seconds: float
    objective: float
    text: str

    @property
    def is_step(self) -> bool:
        return self.phase in TIMELINE_STEPS


def parse_target(text: str) -> Target:
    """`first_token<60s@99%`, `total<10m@95%`, `weights<90s@99%`. ValueError says why."""
    m = _TARGET.match(text)
    if m is None:
        raise ValueError(
            f"target {text!r}: expected PHASE<DURATION@PERCENT, e.g. first_token<60s@99%"
        )
    what, pct = m.group("what"), float(m.group("pct"))
    if what not in KNOWN and what not in TIMELINE_STEPS:
        known = ", ".join((*KNOWN, *TIMELINE_STEPS))
        raise ValueError(f"target {text!r}: unknown phase {what!r} (one of {known})")
    if not 0 < pct <= 100:
        raise ValueError(f"target {text!r}: percent must be in (0, 100], got {pct:g}")
    seconds = float(m.group("n")) * _UNIT_S[m.group("unit") or "s"]
    return Target(what, seconds, pct / 100.0, text.strip())


@dataclass(frozen=True, slots=True)
class Share:
    pods: float  # observations in the window (increase of _count)
    within: float  # of them, at or under the threshold
    exact: bool  # the threshold is a bucket bound; else interpolated inside its bucket

    @property
    def fraction(self) -> float | None:
        return self.within / self.pods if self.pods > 0 else None


def share_within(buckets: list[tuple[float, float]], threshold: float) -> Share:
    """Cumulative (le, count) pairs → how many observations were ≤ threshold. Between two
    bounds the count is interpolated linearly, as histogram_quantile does."""
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return Share(0.0, 0.0, True)
    total = ordered[-1][1]
    lower_le, lower_n = 0.0, 0.0
    for le, n in ordered:
        if le == threshold:
            return Share(total, n, True)
        if le > threshold:
            if math.isinf(le):
                return Share(total, lower_n, False)  # past the last bound: only what's known
            part = (threshold - lower_le) / (le - lower_le)
            return Share(total, lower_n + part * (n - lower_n), False)
        lower_le, lower_n = le, n
    return Share(total, total, True)
