"""Bad input through `remediator replay`: never a crash, never a wrong phase; a bad line is
named FILE:LINE on stderr and skipped, and the exit code says so. Inputs that are merely
awkward (duplicates, reordering, count bumps, bookmarks, a pod without conditions, Events
before their pod) are normal for a watch: no message, exit 0, the right phases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.replay.conftest import run_replay_cli
from tests.timeline.streams import (
    COLD_START,
    COLD_START_TOTAL,
    IMAGE,
    NS,
    POD,
    cloudevent,
    cold_start,
    event,
    jsonl,
    pod,
    pulled,
    watch,
)

BAD = "tests/data/bad_lines.jsonl"


def _timeline(stdout: str, name: str = POD) -> dict[str, Any]:
    tl = [orjson.loads(x) for x in stdout.splitlines() if x.strip()]
    (obj,) = [o for o in tl if o["kind"] == "timeline" and o["pod"] == name]
    return obj


def test_bad_lines_file() -> None:
    r = run_replay_cli(["--output", "json", BAD])
    assert r.returncode == 1  # lines were skipped
    assert "Traceback" not in r.stderr
    errors = r.stderr.splitlines()
    assert [e.split(": skipped: ")[0] for e in errors] == [
        f"{BAD}:3",  # malformed JSON
        f"{BAD}:5",  # unknown kind
        f"{BAD}:12",  # CloudEvent without id
        f"{BAD}:13",  # Alertmanager version 3
    ]
    assert "not JSON" in errors[0]
    assert "unknown kind 'ConfigMap'" in errors[1]
    assert "CloudEvent without required attribute 'id'" in errors[2]
    assert "version '3'" in errors[3]
    t = _timeline(r.stdout)
    # The duplicate Pulling (8), the count bump to lastTimestamp 250 (11), the stale update
    # after Ready (15) and the late Started event (16) change nothing: 195 − 13 = 182 s pull.
    assert t["phases"] == COLD_START
    assert t["total"] == COLD_START_TOTAL
    assert t["state"] == "serving"


def test_bad_lines_text_output_still_reports() -> None:
    r = run_replay_cli([BAD])
    assert r.returncode == 1
    assert "4 lines skipped" in r.stdout
    assert f"{NS}/{POD}" in r.stdout
    assert len(r.stderr.splitlines()) == 4


_NO_ID = cloudevent({"namespace": NS, "pod": POD}, time="2025-03-01T12:08:50Z")
del _NO_ID["id"]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (b'{"type": "MODIFIED", "object": {"kind": "Pod"', "not JSON"),
        (b"not json at all", "not JSON"),
        (b"[1, 2, 3]", "expected a JSON object"),
        (orjson.dumps(watch({"kind": "Secret", "metadata": {"name": "s"}})), "unknown kind"),
        (orjson.dumps({"type": "SYNC", "object": pod()}), "unknown watch event type"),
        (orjson.dumps(_NO_ID), "'id'"),
        (orjson.dumps({"version": "3", "status": "firing", "alerts": []}), "version '3'"),
        (orjson.dumps(watch(pod() | {"metadata": {"name": POD}})), "metadata.uid"),
        (b"\xff\xfe garbage \x00", "not JSON"),
    ],
)
def test_one_bad_line_between_good_ones(tmp_path: Path, bad: bytes, reason: str) -> None:
    """The bad line is named and skipped; the lines around it are still applied."""
    cs = cold_start()
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl(cs[:5]) + bad + b"\n" + jsonl(cs[5:]))
    r = run_replay_cli(["-o", "json", str(path)])
    assert r.returncode == 1
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"{path}:6: skipped: ")
    assert reason in line
    assert _timeline(r.stdout)["phases"] == COLD_START


def _reordered() -> list[Any]:
    cs = cold_start()
    # Backwards, but for the first token: it needs its pod's timeline to exist (a first token
    # for a pod never seen is dropped by design, see test_phases).
    return [cs[i] for i in (10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11)]


def _events_first() -> list[Any]:
    cs = cold_start()
    return [o for o in cs if o.get("object", {}).get("kind") == "Event"] + [
        o for o in cs if o.get("object", {}).get("kind") != "Event"
    ]


def _with_count_bump() -> list[Any]:
    cs = cold_start()
    bump = watch(event("Pulled", pulled("3m2s", "3m2s", 9876543210), 195, last=400, count=2))
    pulling_bump = watch(event("Pulling", f'Pulling image "{IMAGE}"', 13, last=150, count=3))
    return [*cs[:7], pulling_bump, bump, *cs[7:]]


def _with_bookmarks() -> list[Any]:
    bm = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "1"}}}
    return [x for o in cold_start() for x in (bm, o)]


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(cold_start, id="in-order"),
        pytest.param(lambda: [o for o in cold_start() for _ in range(2)], id="duplicates"),
        pytest.param(_reordered, id="out-of-order"),
        pytest.param(_events_first, id="events-before-their-pod"),
        pytest.param(_with_count_bump, id="count-bump"),
        pytest.param(_with_bookmarks, id="bookmarks"),
    ],
)
def test_awkward_but_valid_streams(tmp_path: Path, stream: Any) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl(stream()))
    r = run_replay_cli(["-o", "json", str(path)])
    assert (r.returncode, r.stderr) == (0, "")
    t = _timeline(r.stdout)
    assert t["phases"] == COLD_START
    assert t["total"] == COLD_START_TOTAL


def test_pod_without_conditions_alone(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl([watch(pod(conditions=False), "ADDED")]))
    r = run_replay_cli(["-o", "json", str(path)])
    assert (r.returncode, r.stderr) == (0, "")
    t = _timeline(r.stdout)
    assert t["state"] == "scheduling"
    assert t["phases"] == dict.fromkeys(COLD_START)  # every phase null: none reached
    assert t["total"] is None


def test_count_bump_alone_does_not_make_a_pull(tmp_path: Path) -> None:
    """MODIFIED of the same Event (count 2, later lastTimestamp) with no Pulling seen: the
    message's figure, ending at the first Pulled, not at the bump."""
    msg = pulled("1m2.5s", "1m10s")
    path = tmp_path / "in.jsonl"
    path.write_bytes(jsonl([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulled", msg, 80, event_name="p.pulled"), "ADDED"),
        watch(event("Pulled", msg, 80, last=300, count=2, event_name="p.pulled"), "MODIFIED"),
        watch(pod(scheduled=10, started=85)),
    ]))  # fmt: skip
    r = run_replay_cli(["-o", "json", str(path)])
    assert r.returncode == 0
    t = _timeline(r.stdout)
    assert t["phases"]["image_pull"] == 70.0  # "(1m10s including waiting)"
    assert t["phases"]["container_start"] == 5.0  # 85 − 80, not 85 − 300
