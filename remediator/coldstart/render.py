"""What `kubectl coldstart` prints. Pure: timelines and `now` in, lines out.

Text: each pod's block exactly as `remediator replay` prints it (`output.pod_lines`: a bar per
phase, vLLM's steps under engine_init), a line for a pod not Ready yet (where, how long, against
its siblings), then per workload the P50/P95 of each phase. JSON: one `timeline` object per pod,
the very object serve's `GET /timelines` and `replay -o json` give, then one `waiting` object per
pod not Ready and one `workload` object per workload.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from remediator.coldstart.report import Spread, Workload, waiting, workloads
from remediator.inputs.timefmt import format_time
from remediator.output import bar_scale, pod_lines
from remediator.timeline.model import PodTimeline

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33"}


def use_color(stream: IO[str], environ: Mapping[str, str]) -> bool:
    """Colours on a terminal only, and never with NO_COLOR set to anything (no-color.org)."""
    return stream.isatty() and not environ.get("NO_COLOR")


@dataclass(frozen=True, slots=True)
class Style:
    color: bool = False

    def __call__(self, text: str, *names: str) -> str:
        if not self.color or not names:
            return text
        return f"\x1b[{';'.join(_CODES[n] for n in names)}m{text}\x1b[0m"


def text(
    timelines: list[PodTimeline], now: float, scope: str, style: Style | None = None
) -> Iterator[str]:
    """The screen: a head line, the pods' blocks, each workload's figures."""
    paint = style or Style()
    groups = workloads(timelines)
    counts: dict[str, int] = {}
    for t in timelines:
        counts[t.state()] = counts.get(t.state(), 0) + 1
    told = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    plural = "pod" if len(timelines) == 1 else "pods"
    yield paint(f"{scope}: {len(timelines)} {plural}", "bold") + (f" ({told})" if told else "")
    yield paint(f"as of {format_time(now)} (API server clock)", "dim")
    longest = bar_scale(timelines)
    for w in groups:
        for t in sorted(w.pods, key=lambda t: (t.created or 0.0, t.name)):
            yield ""
            yield from pod_lines(t, longest)
            wait = waiting(t, w, now)
            if wait is not None:
                yield paint(f"  ▶ not Ready: {wait.sentence()}", "red" if wait.slower else "yellow")
    for w in groups:
        yield ""
        yield from _figures(w, paint)


def _figures(w: Workload, paint: Style) -> Iterator[str]:
    plural = "pod" if len(w.pods) == 1 else "pods"
    yield paint(f"{w.namespace} {w.name}: {len(w.pods)} {plural}, where the time goes", "bold")
    yield f"  {'phase':<20}{'P50':>8}{'P95':>9}  pods that finished it"
    phases = w.phases()
    has_init = any(t.has_init for t in w.pods)
    for phase, s in phases.items():
        if phase == "init" and not has_init:
            continue
        if phase == "engine_init":
            yield _row(f"{phase}", s)
            for step, ss in w.steps().items():
                yield _row(f" · {step}", ss)
            continue
        yield _row(phase, s)


def _row(name: str, s: Spread) -> str:
    if s.p50 is None or s.p95 is None:
        return f"  {name:<20}{'-':>8}{'-':>9}  {s.pods}"
    return f"  {name:<20}{s.p50:>7.1f}s{s.p95:>8.1f}s  {s.pods}"


def json_docs(timelines: list[PodTimeline], now: float) -> Iterator[dict[str, Any]]:
    """serve's /timelines objects (same order: namespace, pod, creation), then the report's."""
    ordered = sorted(timelines, key=lambda t: (t.namespace, t.name, t.created or 0.0))
    for t in ordered:
        yield t.to_json()
    groups = workloads(timelines)
    for w in groups:
        for t in w.pods:
            wait = waiting(t, w, now)
            if wait is not None:
                yield wait.to_json()
    for w in groups:
        yield w.to_json()
