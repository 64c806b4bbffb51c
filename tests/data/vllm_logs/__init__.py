"""Real vLLM start-up logs (see README.md), fed as EngineLog inputs, and what each should give
(expected.toml, checked by hand against the lines)."""

from __future__ import annotations

import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
_VLLM_CLOCK = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
_KUBELET = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")
SOURCE = "# source: "  # each file's first line: the thread it was copied from


def lines(name: str) -> list[str]:
    """The log lines of one file, as posted, without the provenance line."""
    text = (HERE / name).read_text(encoding="utf-8")
    return [ln for ln in text.splitlines() if ln and not ln.startswith(SOURCE)]


def files() -> list[str]:
    return sorted(p.name for p in HERE.glob("*.log"))


def expected() -> dict[str, Any]:
    """expected.toml: per file, the marks its lines give, the steps and where the engine is."""
    with (HERE / "expected.toml").open("rb") as f:
        return tomllib.load(f)


def year(name: str) -> int:
    """The year of a file's log (its name starts with it): vLLM's clock has none."""
    return int(name[:4])


def vllm_time(line: str, year: int) -> float | None:
    """The time vLLM's own prefix gives (`INFO 11-24 11:43:54`), in UTC of `year`."""
    m = _VLLM_CLOCK.search(line)
    if m is None:
        return None
    mo, d, h, mi, s = (int(g) for g in m.groups())
    return datetime(year, mo, d, h, mi, s, tzinfo=UTC).timestamp()


def replay(name: str, ns: str = "llm", pod: str = "p") -> list[dict[str, Any]]:
    """The file's lines as the follower would deliver them: each at the kubelet's time where
    the line has it, else when it was printed, i.e. at the latest vLLM clock so far (a line
    Ray forwards or reprints late arrives then, whatever its own clock says)."""
    docs: list[dict[str, Any]] = []
    arrived = 0.0
    for line in lines(name):
        if _KUBELET.match(line):
            docs.append({"kind": "EngineLog", "namespace": ns, "pod": pod, "line": line})
            continue
        own = vllm_time(line, year(name))
        arrived = max(arrived, own) if own is not None else arrived
        docs.append(engine_log(ns, pod, line, arrived))
    return docs


def engine_log(ns: str, pod: str, line: str, at: float, uid: str | None = None) -> dict[str, Any]:
    """An EngineLog input as the follower or a recording writes it."""
    doc: dict[str, Any] = {"kind": "EngineLog", "namespace": ns, "pod": pod, "line": line}
    doc["time"] = datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")
    if uid:
        doc["uid"] = uid
    return doc
