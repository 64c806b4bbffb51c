"""A real control plane's watch stream (tests/data/cluster, recorded by tests/live), replayed:
the core decides what serve decided live, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from remediator.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "cluster"


def replay_json(
    tmp_path: Path, recording: Path, policy: str, capsys: pytest.CaptureFixture[str]
) -> list[dict]:  # type: ignore[type-arg]
    pol = tmp_path / "policy.yaml"
    pol.write_text(policy)
    with pytest.raises(SystemExit) as done:
        main(["replay", "-o", "json", "--policy", str(pol), str(recording)])
    assert done.value.code == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_the_hung_pod_recording_replays_to_the_live_decision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = json.loads((DATA / "hung-engine-init.expected.json").read_text())
    lines = replay_json(tmp_path, DATA / "hung-engine-init.jsonl", expected["policy"], capsys)
    decided = [{"action": d["action"], "uid": d["uid"]} for d in lines if d["kind"] == "decision"]
    assert decided == expected["decisions"]
    timelines = {t["uid"]: t for t in lines if t["kind"] == "timeline" and "vllm-hang" in t["pod"]}
    hung = timelines[expected["decisions"][0]["uid"]]
    assert hung["state"] == "deleted"
    healthy = [t for uid, t in timelines.items() if uid != hung["uid"]]
    assert len(healthy) == 3  # two siblings and the replacement
    for t in healthy:
        assert t["state"] == "ready"
        assert t["phases"]["image_pull"] == pytest.approx(1.0, abs=1.0)
        assert t["phases"]["engine_init"] == pytest.approx(3.0, abs=1.0)
