"""The real H200 trace and the phase marks of the processes that made it, aligned.

smi_trace.csv timestamps are UTC wall-clock ("2026/11/30 10:57:58.168"); the phase
files mark each phase's end as `wall` (epoch seconds) on the same clock.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.steps.conftest import SMI, TRACE, TRACE_COLUMNS


def phases(name: str) -> dict[str, float]:
    """{phase: wall-clock end} from phase_<name>.txt (non-JSON lines are progress bars)."""
    marks: dict[str, float] = {}
    for line in (SMI / f"phase_{name}.txt").read_text().splitlines():
        if line.startswith("{"):
            mark = json.loads(line)
            marks[mark["phase"]] = mark["wall"]
    return marks


def trace_time(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def trace_lines(start: float, end: float) -> list[str]:
    """The raw trace lines recorded in [start, end] (wall-clock seconds)."""
    return [
        line
        for line in TRACE.read_text().splitlines()
        if start <= trace_time(line.split(",")[0]) <= end
    ]


def as_query_line(trace_line: str, uuid: str) -> str:
    """A trace line re-cut as the verifier's query prints it: index, uuid, used, total."""
    _, index, used, total, _ = (f.strip() for f in trace_line.split(","))
    return f"{index}, {uuid}, {used}, {total}"


__all__ = ["TRACE_COLUMNS", "as_query_line", "phases", "trace_lines", "trace_time"]
