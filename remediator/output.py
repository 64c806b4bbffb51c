"""How replay (and the service's log) print what the core saw and decided."""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any, Protocol

import orjson

from remediator.inputs.timefmt import format_time
from remediator.timeline.model import PHASES, PodTimeline
from remediator.timeline.tracker import StateChange

if TYPE_CHECKING:
    from remediator.session import Session


class Output(Protocol):
    def transition(self, change: StateChange) -> None: ...
    def error(self, where: str, message: str) -> None: ...
    def finish(self, session: Session, lines: int, inputs: int, skipped: int) -> None: ...


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

    def error(self, where: str, message: str) -> None:
        _err(where, message)

    def finish(self, session: Session, lines: int, inputs: int, skipped: int) -> None:
        timelines = [t for t in session.tracker if t.pod_seen or t.state() != "unknown"]
        longest = max((t.total() or _sum(t) for t in timelines), default=0.0) or 1.0
        self._say(f"{len(timelines)} pods, {inputs} inputs from {lines} lines")
        if skipped:
            self._say(f"{skipped} lines skipped (see stderr)")
        for t in sorted(timelines, key=lambda t: (t.namespace, t.created or 0.0, t.name)):
            self._pod(t, longest)

    def _pod(self, t: PodTimeline, longest: float) -> None:
        total = t.total()
        head = f"{t.namespace}/{t.name}"
        facts = [f"state={t.state()}", f"node={t.node or '-'}", f"model={t.model or '-'}"]
        if t.restarts:
            facts.append(f"restarts={t.restarts}")
        if t.unschedulable:
            facts.append(f"unschedulable={t.unschedulable[:60]!r}")
        self._say()
        self._say(f"{head}  {'  '.join(facts)}")
        for phase, value in t.phases().items():
            if value is None:
                self._say(f"  {phase:<16} {'-':>8}")
                continue
            bar = "█" * max(1 if value > 0 else 0, round(value / longest * self.WIDTH))
            self._say(f"  {phase:<16} {value:>7.1f}s {bar}")
        self._say(f"  {'total':<16} {f'{total:.1f}s' if total is not None else '-':>8}")


def _sum(t: PodTimeline) -> float:
    return sum(v for v in t.phases().values() if v is not None)


assert PHASES  # the order of t.phases() is PHASES
