"""How replay (and the service's log) print what the core saw and decided."""

from __future__ import annotations

import math
from typing import IO, TYPE_CHECKING, Any, Protocol

import orjson

from remediator.contract.actions import action
from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.timefmt import format_time
from remediator.policy.outcome import Ignored
from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES, PodTimeline
from remediator.timeline.tracker import StateChange

if TYPE_CHECKING:
    from remediator.session import Session


class Output(Protocol):
    def transition(self, change: StateChange) -> None: ...
    def decision(self, decision: Decision) -> None: ...
    def suppressed(self, suppressed: Suppressed) -> None: ...
    def ignored(self, ignored: Ignored) -> None: ...
    def error(self, where: str, message: str) -> None: ...
    def finish(self, session: Session, lines: int, inputs: int, skipped: int) -> None: ...


def decision_json(d: Decision) -> dict[str, Any]:
    """The `decision` line of the replay output (and of the service's log)."""
    key = action(d.action).target or ("pod" if d.uid else "node")
    doc: dict[str, Any] = {
        "kind": "decision",
        "action": d.action,
        "namespace": d.namespace or None,
        key: d.target,
        "uid": d.uid,
        "reason": d.reason,
        "incident": d.incident,
        "at": format_time(d.at),
    }
    if d.workload:
        doc["workload"] = d.workload
    doc.update(dict(d.params))
    return doc


def suppressed_json(s: Suppressed, now: float | None = None) -> dict[str, Any]:
    doc = decision_json(s.decision)
    doc.update(kind="suppressed", guardrail=s.guardrail, reason=s.reason)
    doc["decision_reason"] = s.decision.reason
    return doc


def _err(where: str, message: str) -> None:
    import sys

    print(f"{where}: skipped: {message}", file=sys.stderr)


class JsonOutput:
    """One JSON object per line: transitions and decisions as they happen, then timelines."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def _emit(self, obj: dict[str, Any]) -> None:
        self._stream.write(orjson.dumps(obj).decode() + "\n")

    def transition(self, change: StateChange) -> None:
        t = change.timeline
        self._emit(
            {
                "kind": "transition",
                "at": format_time(change.at),
                "namespace": t.namespace,
                "pod": t.name,
                "uid": t.uid if not t.uid.startswith("?") else None,
                "from": change.before,
                "to": change.after,
            }
        )

    def decision(self, decision: Decision) -> None:
        self._emit(decision_json(decision))

    def suppressed(self, suppressed: Suppressed) -> None:
        self._emit(suppressed_json(suppressed))

    def ignored(self, ignored: Ignored) -> None:
        self._emit(
            {
                "kind": "ignored",
                "rule": ignored.rule,
                "subject": ignored.subject,
                "reason": ignored.reason,
                "at": format_time(ignored.at),
            }
        )

    def error(self, where: str, message: str) -> None:
        _err(where, message)

    def finish(self, session: Session, lines: int, inputs: int, skipped: int) -> None:
        for t in session.tracker:
            self._emit(t.to_json())


class TextOutput:
    """For people: what happened, then one block per pod with a bar per phase."""

    WIDTH = 40

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def _say(self, line: str = "") -> None:
        self._stream.write(line + "\n")

    def transition(self, change: StateChange) -> None:
        return  # the per-pod blocks at the end tell the story; decisions print as they come

    def decision(self, decision: Decision) -> None:
        self._say(f"{_clock(decision.at)}  ACT      {_what(decision)}  [{decision.incident}]")
        self._say(f"{'':10}           {decision.reason}")

    def suppressed(self, suppressed: Suppressed) -> None:
        d = suppressed.decision
        self._say(f"{_clock(d.at)}  HELD     {_what(d)}  by {suppressed.guardrail}")
        self._say(f"{'':10}           {suppressed.reason}")

    def ignored(self, ignored: Ignored) -> None:
        self._say(f"{_clock(ignored.at)}  IGNORED  {ignored.subject}: {ignored.reason}")

    def error(self, where: str, message: str) -> None:
        _err(where, message)

    def finish(self, session: Session, lines: int, inputs: int, skipped: int) -> None:
        timelines = list(session.tracker)  # every pod the JSON output reports, no fewer
        longest = bar_scale(timelines)
        self._say(f"{len(timelines)} pods, {inputs} inputs from {lines} lines")
        if skipped:
            self._say(f"{skipped} lines skipped (see stderr)")
        for t in sorted(timelines, key=lambda t: (t.namespace, t.created or 0.0, t.name)):
            self._pod(t, longest)
        self._summary(timelines)

    def _summary(self, timelines: list[PodTimeline]) -> None:
        """Where the time goes, per model: P50 / P95 of each phase over the pods that
        finished it (the figures an SRE tunes against)."""
        models = sorted({t.model or "-" for t in timelines})
        cols = (*PHASES, "total")
        self._say()
        self._say(f"{'model':<40} {'pods':>4}  " + "  ".join(f"{c:>15}" for c in cols))
        self._say(f"{'':<40} {'':>4}  " + "  ".join(f"{'p50 / p95':>15}" for _ in cols))
        for model in models:
            mine = [t for t in timelines if (t.model or "-") == model]
            cells = [_p50_p95([t.phases()[c] for t in mine]) for c in PHASES]
            cells.append(_p50_p95([t.total() for t in mine]))
            self._say(f"{model[-40:]:<40} {len(mine):>4}  " + "  ".join(f"{c:>15}" for c in cells))

    def _pod(self, t: PodTimeline, longest: float) -> None:
        self._say()
        for line in pod_lines(t, longest, self.WIDTH):
            self._say(line)


BAR_WIDTH = 40


def pod_lines(t: PodTimeline, longest: float, width: int = BAR_WIDTH) -> list[str]:
    """One pod's block: a head line of facts, a bar per phase (scaled so `longest` seconds
    fill `width`), vLLM's steps under engine_init when its log was read, and the total.
    Replay prints it; `kubectl coldstart` prints the same block for live pods."""
    total = t.total()
    facts = [f"state={t.state()}", f"node={t.node or '-'}", f"model={t.model or '-'}"]
    if t.restarts:
        facts.append(f"restarts={t.restarts}")
    skew = t.clock_skew()
    if skew:
        facts.append(f"clock_skew={skew:+.1f}s (node vs API server; node times moved)")
    if t.unschedulable:
        facts.append(f"unschedulable={t.unschedulable[:60]!r}")
    lines = [f"{t.namespace}/{t.name}  {'  '.join(facts)}"]
    for phase, value in t.phases().items():
        if phase == "init" and not t.has_init:
            continue  # no init containers: no init phase
        if value is None:
            lines.append(f"  {phase:<16} {'-':>8}")
        else:
            bar = "█" * max(1 if value > 0 else 0, round(value / longest * width))
            lines.append(f"  {phase:<16} {value:>7.1f}s {bar}")
        if phase == "engine_init":
            lines.extend(_step_lines(t, longest, width))
    lines.append(f"  {'total':<16} {f'{total:.1f}s' if total is not None else '-':>8}")
    return lines


def _step_lines(t: PodTimeline, longest: float, width: int) -> list[str]:
    """vLLM's own steps under engine_init (when the pod's log was read)."""
    if t.engine is None:
        return []
    detail, steps, now = t.engine.detail, t.engine_steps(), t.engine_step()
    lines = []
    for step in TIMELINE_STEPS:
        note = f"  {detail[step]}" if step in detail else ""
        if step in steps:
            value = steps[step]
            bar = "▒" * max(1 if value > 0 else 0, round(value / longest * width))
            lines.append(f" · {step:<16}{value:>7.1f}s {bar}{note}")
        elif note and step != now:  # V1's KV cache: no line ends it, the next step's does
            lines.append(f" · {step:<16}{'-':>8}{note} (timed with the next step)")
    if now is not None:
        note = f"  {detail[now]}" if now in detail else ""
        lines.append(f" · {now:<16}{'…':>8} in progress{note}")
    return lines


def nearest_rank(done: list[float], q: float) -> float:
    """The q-quantile of sorted, non-empty `done` by nearest rank (a value that occurred)."""
    return done[max(0, math.ceil(q * len(done)) - 1)]


def _p50_p95(values: list[float | None]) -> str:
    done = sorted(v for v in values if v is not None)
    if not done:
        return "-"
    return f"{nearest_rank(done, 0.5):.0f}s / {nearest_rank(done, 0.95):.0f}s"


def _clock(ts: float) -> str:
    return format_time(ts)[11:19]


def _what(d: Decision) -> str:
    where = f"{d.namespace}/{d.target}" if d.namespace else d.target
    return f"{d.action} {where}"


def bar_scale(timelines: list[PodTimeline]) -> float:
    """The seconds a full bar stands for: the longest pod's total (else its phases' sum)."""
    return max((t.total() or _sum(t) for t in timelines), default=0.0) or 1.0


def _sum(t: PodTimeline) -> float:
    return sum(v for v in t.phases().values() if v is not None)
