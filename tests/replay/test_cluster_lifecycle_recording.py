"""A recording of the real control plane (kube-apiserver, scheduler and controller-manager
v1.36.3, kwok v0.8.0 playing the kubelet; made by tests/live/test_lifecycle.py): a vLLM pod
crash-looping (lastState, CrashLoopBackOff, a second and third Started) and another deleted
gracefully (deletionTimestamp, then DELETED) while its replacement starts.

Replayed as recorded, Events first, and Pods first (how two `kubectl get -w` streams may
interleave), it must give the same timelines and the same decisions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from remediator.inputs.timefmt import format_time, parse_time
from tests.data import DATA
from tests.replay.conftest import run_replay_cli

RECORDING = DATA / "cluster" / "crashloop_and_delete_k8s-v1.36.3_kwok-v0.8.0.jsonl"
CRASHY = "953b10c6-5a22-4537-a43c-285d70ea1bbf"
DELETED = "53a488fa-e56f-4921-8547-752e8cd27c72"
# Budgets short enough for a 50 s recording, static (no floor for want of history); the
# clock then runs on past its end.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  budgets: {engine_init: 5, container_start: 5}
  adaptive: {enabled: false}
  checks: 1
guardrails:
  min_age: {factor: 0}
"""


def _orders(tmp_path: Path) -> dict[str, Path]:
    docs = [orjson.loads(x) for x in RECORDING.read_bytes().splitlines()]
    pods = [d for d in docs if d["object"]["kind"] == "Pod"]
    events = [d for d in docs if d["object"]["kind"] != "Pod"]
    out = {"as recorded": RECORDING}
    for name, order in (("events first", events + pods), ("pods first", pods + events)):
        path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in order))
        out[name] = path
    return out


def _replay(path: Path, tmp_path: Path) -> list[dict[str, Any]]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    r = run_replay_cli(["-o", "json", "--policy", str(policy),
                        "--until", "2026-12-01T07:00:00Z", str(path)])  # fmt: skip
    assert (r.returncode, r.stderr) == (0, "")
    return [json.loads(x) for x in r.stdout.splitlines()]


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("cluster")
    return {name: _replay(path, tmp) for name, path in _orders(tmp).items()}


def _first_start(uid: str) -> float:
    """The earliest startedAt the recording shows for the pod's engine (vllm)."""
    starts = []
    for line in RECORDING.read_bytes().splitlines():
        obj = orjson.loads(line)["object"]
        if obj["kind"] != "Pod" or obj["metadata"]["uid"] != uid:
            continue
        for s in obj["status"].get("containerStatuses", []):
            for state in (s.get("state", {}), s.get("lastState", {})):
                for run in (state.get("running"), state.get("terminated")):
                    if run and run.get("startedAt"):
                        starts.append(parse_time(run["startedAt"]))
    return min(starts)


def _decisions(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(d["kind"], d["action"], d["uid"], d["at"], d["reason"])
            for d in lines if d["kind"] in ("decision", "suppressed")]  # fmt: skip


def _timelines(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["uid"]: t for t in lines if t["kind"] == "timeline"}


def test_any_order_of_the_two_streams_decides_the_same(
    replays: dict[str, list[dict[str, Any]]],
) -> None:
    recorded = replays["as recorded"]
    assert _decisions(recorded)  # not vacuous
    for name, lines in replays.items():
        assert _decisions(lines) == _decisions(recorded), name
        assert _timelines(lines) == _timelines(recorded), name


def test_one_decision_per_pod_never_about_the_deleted_one(
    replays: dict[str, list[dict[str, Any]]],
) -> None:
    uids = [d[2] for d in _decisions(replays["as recorded"])]
    assert len(uids) == len(set(uids))  # no second decision (and HELD) at one instant
    assert DELETED not in uids


def test_the_crash_loop_counts_from_its_first_start(
    replays: dict[str, list[dict[str, Any]]],
) -> None:
    t = _timelines(replays["as recorded"])[CRASHY]
    assert (t["state"], t["restarts"]) == ("engine_init", 2)
    assert (t["phases"]["image_pull"], t["phases"]["container_start"]) == (2.0, 2.0)
    (d,) = [d for d in replays["as recorded"] if d["kind"] == "decision" and d["uid"] == CRASHY]
    assert d["at"] == format_time(_first_start(CRASHY) + 5.0)  # from the first start
    assert "engine_init for 5s" in d["reason"]
    assert _timelines(replays["as recorded"])[DELETED]["state"] == "deleted"
