"""The screen and the JSON lines: replay's own pod blocks and timeline objects, plus the report."""

from __future__ import annotations

import json
import os
import tempfile

from remediator.coldstart.render import Style, json_docs, text, use_color
from remediator.inputs.timefmt import parse_time
from tests.coldstart.support import HUNG, STEPS, snapshot_of
from tests.replay.conftest import run_replay_cli

MID_HANG = "2026-12-01T05:57:36Z"


def _blocks(lines: list[str]) -> list[list[str]]:
    """Pod blocks: from a `namespace/pod  state=` line to its `total` line."""
    out: list[list[str]] = []
    for line in lines:
        if "  state=" in line:
            out.append([line])
        elif out and not out[-1][-1].lstrip().startswith("total"):
            out[-1].append(line)
    return out


def test_each_pod_is_the_block_replay_prints_then_where_it_waits() -> None:
    snap = snapshot_of(HUNG, until=MID_HANG)
    screen = list(text(snap.timelines(), parse_time(MID_HANG), "llm-inference deploy/vllm-hang"))
    replayed = run_replay_cli(["--until", MID_HANG, str(HUNG)])
    assert replayed.returncode == 0, replayed.stderr
    ours, theirs = _blocks(screen), _blocks(replayed.stdout.splitlines())
    assert len(ours) == 3
    assert sorted(ours) == sorted(theirs)
    hung = screen.index(next(b[0] for b in ours if "7gzjz" in b[0]))
    after = screen[hung + len(next(b for b in ours if "7gzjz" in b[0]))]
    assert after == (
        "  ▶ not Ready: engine_init for 6.0s; siblings P50 3.0s, P95 3.0s (2 pods): "
        "longer than 95% of them"
    )
    assert screen[0] == "llm-inference deploy/vllm-hang: 3 pods (2 ready, 1 engine_init)"
    figures = screen[screen.index("llm-inference deploy/vllm-hang: 3 pods, where the time goes") :]
    assert "  engine_init             3.0s     3.0s  2" in figures
    assert "  image_pull              2.0s     2.0s  3" in figures
    assert "  first_token                -        -  0" in figures
    assert not any("\x1b[" in line for line in screen)  # no colour unless asked


def test_the_json_timelines_are_replays_and_so_serves() -> None:
    snap = snapshot_of(HUNG, until=MID_HANG)
    docs = list(json_docs(snap.timelines(), parse_time(MID_HANG)))
    replayed = run_replay_cli(["-o", "json", "--until", MID_HANG, str(HUNG)])
    theirs = [json.loads(x) for x in replayed.stdout.splitlines()]
    want = sorted(
        (d for d in theirs if d["kind"] == "timeline" and d["state"] != "deleted"),
        key=lambda d: (d["namespace"], d["pod"]),
    )
    ours = [json.loads(json.dumps(d)) for d in docs if d["kind"] == "timeline"]
    assert ours == want
    (wait,) = [d for d in docs if d["kind"] == "waiting"]
    assert wait["pod"] == "vllm-hang-d6b447899-7gzjz" and wait["for_s"] == 6.0
    assert wait["siblings"] == {"p50": 3.0, "p95": 3.0, "pods": 2}
    (workload,) = [d for d in docs if d["kind"] == "workload"]
    assert workload["workload"] == "deploy/vllm-hang"
    assert workload["phases"]["engine_init"] == {"p50": 3.0, "p95": 3.0, "pods": 2}


def test_engine_init_steps_show_under_the_bars_and_in_the_figures() -> None:
    snap = snapshot_of(STEPS)
    screen = list(text(snap.timelines(), snap.clock, "llm all pods"))
    assert " · cuda_graphs        37.0s ▒▒▒  0.45 GiB" in screen, screen
    assert "   · cuda_graphs         37.0s    37.0s  1" in screen


def test_colour_only_when_asked() -> None:
    snap = snapshot_of(HUNG, until=MID_HANG)
    now = parse_time(MID_HANG)
    coloured = list(text(snap.timelines(), now, "x", Style(color=True)))
    assert any(line.startswith("\x1b[31m  ▶ not Ready") for line in coloured)
    assert Style(color=False)("plain", "red") == "plain"


def test_colour_on_a_terminal_unless_no_color() -> None:
    leader, follower = os.openpty()  # a real terminal
    with open(follower, "w") as tty, open(leader, "rb", buffering=0):
        assert use_color(tty, {})
        assert use_color(tty, {"NO_COLOR": ""})  # no-color.org: set and not empty
        assert not use_color(tty, {"NO_COLOR": "1"})
    with tempfile.TemporaryFile("w") as plain:
        assert not use_color(plain, {})
