"""Read nvidia-smi `--query-gpu ... --format=csv` output into samples. Pure: text in.

Accepts both `csv,noheader,nounits` (what the verify step asks for) and plain `csv`
(a header line names the columns, values carry " MiB"). A header line anywhere
switches the column layout from there on, so concatenated captures parse too.
Values nvidia-smi cannot read ("[N/A]", "[GPU requires reset]") become NaN, which
the decision counts as an invalid reading of that GPU rather than a parse error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from remediator.steps.gpu_memory import Reading, Sample

QUERY_COLUMNS: tuple[str, ...] = ("index", "uuid", "memory.used", "memory.total")
REQUIRED = ("index", "memory.used", "memory.total")
_KNOWN = {"index", "uuid", "timestamp", "name", "pci.bus_id", "memory.used", "memory.total"}
_UNIT = re.compile(r"\s*\[[^\]]*\]$")  # "memory.used [MiB]" -> "memory.used"
_NUMBER_WITH_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(?:MiB)?$")


@dataclass(frozen=True, slots=True)
class ParseError:
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}: {self.text[:120]!r}"


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    reading: Reading
    at: str | None


@dataclass(frozen=True, slots=True)
class Parsed:
    samples: tuple[Sample, ...]
    errors: tuple[ParseError, ...]


def _fields(line: str) -> list[str]:
    return [f.strip() for f in line.split(",")]


def _header(fields: Sequence[str]) -> tuple[str, ...] | None:
    names = tuple(_UNIT.sub("", f).lower() for f in fields)
    return names if names and names[0] in _KNOWN and not names[0].isdigit() else None


def _mib(value: str) -> float:
    """A memory value; unreadable ones ("[N/A]", "Unknown Error") are NaN."""
    m = _NUMBER_WITH_UNIT.match(value)
    return float(m.group(1)) if m else float("nan")


def _row(n: int, fields: Sequence[str], columns: Sequence[str]) -> Row | ParseError:
    text = ", ".join(fields)
    if len(fields) != len(columns):
        want = ",".join(columns)
        return ParseError(n, text, f"expected {len(columns)} fields ({want}), got {len(fields)}")
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        return ParseError(n, text, f"no {', '.join(missing)} column")
    value = dict(zip(columns, fields, strict=True))
    if not value["index"].isdigit():
        return ParseError(n, text, f"GPU index {value['index']!r} is not a number")
    reading = Reading(
        index=int(value["index"]),
        used_mib=_mib(value["memory.used"]),
        total_mib=_mib(value["memory.total"]),
        uuid=value.get("uuid") or None,
    )
    return Row(n, reading, value.get("timestamp"))


def parse_rows(
    text: str, columns: Sequence[str] = QUERY_COLUMNS, first_line: int = 1
) -> tuple[list[Row], list[ParseError]]:
    rows: list[Row] = []
    errors: list[ParseError] = []
    for n, raw in enumerate(text.splitlines(), start=first_line):
        if not raw.strip():
            continue
        fields = _fields(raw)
        header = _header(fields)
        if header is not None:
            columns = header
            continue
        parsed = _row(n, fields, columns)
        if isinstance(parsed, Row):
            rows.append(parsed)
        else:
            errors.append(parsed)
    return rows, errors


def group_samples(rows: Iterable[Row]) -> tuple[Sample, ...]:
    """Split a recording into samples: a new one starts when a GPU index repeats
    (`-lms` prints each round's GPUs in order, one line each)."""
    samples: list[Sample] = []
    current: list[Row] = []
    for row in rows:
        if any(r.reading.index == row.reading.index for r in current):
            samples.append(_sample(current))
            current = []
        current.append(row)
    if current:
        samples.append(_sample(current))
    return tuple(samples)


def _sample(rows: Sequence[Row]) -> Sample:
    return Sample(readings=tuple(r.reading for r in rows), at=rows[0].at)


def parse_recording(text: str, columns: Sequence[str] = QUERY_COLUMNS) -> Parsed:
    rows, errors = parse_rows(text, columns)
    return Parsed(samples=group_samples(rows), errors=tuple(errors))
