"""The repo stands alone: tests read data only from the repo, and the test script stops only
what it started. (The real proof is a clone with no ../shared beside it; these checks keep
the references from creeping back.)"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tests.data import DATA

REPO = Path(__file__).resolve().parents[1]
CHECKED = ("tests", "bench", "scripts", ".ci")
OUTSIDE = re.compile(r"""["']\.\.["']\s*/\s*["']shared["']|\.\./shared|/work/shared""")
BY_NAME = re.compile(r"\b(pkill|killall)\b")


def _sources() -> list[Path]:
    files = [p for d in CHECKED for p in (REPO / d).rglob("*") if p.is_file()]
    return [p for p in files if p.suffix in ("", ".py", ".sh") and "__pycache__" not in p.parts]


def test_nothing_reads_outside_the_repo() -> None:
    hits = [
        f"{p.relative_to(REPO)}:{n}"
        for p in _sources()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line) and p != Path(__file__).resolve()
    ]
    assert not hits, hits


def test_nothing_stops_processes_by_name() -> None:
    hits = [
        f"{p.relative_to(REPO)}:{n}"
        for p in _sources()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
        if BY_NAME.search(line) and p != Path(__file__).resolve()
    ]
    assert not hits, hits


def test_copied_captures_match_their_recorded_hashes() -> None:
    """README.md lists a sha256 per copied file; every file under captures/ and schemas/ is
    listed, and each is byte for byte what was copied."""
    block = (DATA / "README.md").read_text().split("```")[1]
    listed = dict(reversed(line.split()) for line in block.strip().splitlines())
    present = {
        str(p.relative_to(DATA)): hashlib.sha256(p.read_bytes()).hexdigest()
        for sub in ("captures", "schemas")
        for p in sorted((DATA / sub).rglob("*"))
        if p.is_file()
    }
    assert present == listed
