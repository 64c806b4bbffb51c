"""Real vLLM start-up log lines (see README.md) and helpers to feed them as EngineLog inputs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_VLLM_CLOCK = re.compile(r"(?:INFO|DEBUG|WARNING) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def lines(name: str) -> list[str]:
    """The log lines of one file, without the provenance comments."""
    text = (HERE / name).read_text(encoding="utf-8")
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


def files() -> list[str]:
    return sorted(p.name for p in HERE.glob("*.log"))


def vllm_time(line: str, year: int) -> float | None:
    """The time vLLM's own prefix gives (`INFO 11-24 11:43:54`), in UTC of `year`."""
    m = _VLLM_CLOCK.search(line)
    if m is None:
        return None
    mo, d, h, mi, s = (int(g) for g in m.groups())
    return datetime(year, mo, d, h, mi, s, tzinfo=UTC).timestamp()


def engine_log(ns: str, pod: str, line: str, at: float, uid: str | None = None) -> dict[str, Any]:
    """An EngineLog input as the follower or a recording writes it."""
    doc: dict[str, Any] = {"kind": "EngineLog", "namespace": ns, "pod": pod, "line": line}
    doc["time"] = datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")
    if uid:
        doc["uid"] = uid
    return doc
