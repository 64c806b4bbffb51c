"""`remediator replay` end to end, through the console script in a subprocess."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.data import CAPTURES, make
from tests.replay.conftest import REPO, _replay_argv, run_replay_cli
from tests.timeline.streams import COLD_START, COLD_START_TOTAL, MODEL, NODE, UID, at

DATA = Path(__file__).resolve().parents[1] / "data"
COLD = "tests/data/cold_start_70b.jsonl"
K8S = CAPTURES / "k8s"

TIMELINE_KEYS = {
    "kind", "namespace", "pod", "uid", "node", "model", "state", "restarts", "phases", "total"
}  # fmt: skip
PHASE_KEYS = {"scheduling", "init", "image_pull", "container_start", "engine_init", "first_token"}


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in stdout.splitlines() if line.strip()]


def _timelines(stdout: str) -> dict[str, dict[str, Any]]:
    return {o["pod"]: o for o in _json_lines(stdout) if o["kind"] == "timeline"}


@pytest.mark.parametrize("name", sorted(make.FILES))
def test_data_files_are_what_make_writes(name: str) -> None:
    assert (DATA / name).read_bytes() == make.FILES[name](), "run: python -m tests.data.make"


def test_json_output_shape_and_phases() -> None:
    r = run_replay_cli(["--output", "json", COLD])
    assert (r.returncode, r.stderr) == (0, "")
    tl = _timelines(r.stdout)
    assert set(tl) == {"llama-70b-0", "llama-70b-1"}
    for obj in tl.values():
        assert set(obj) == TIMELINE_KEYS
        assert set(obj["phases"]) == PHASE_KEYS
    done = tl["llama-70b-0"]
    assert done == {
        "kind": "timeline",
        "namespace": "llm",
        "pod": "llama-70b-0",
        "uid": UID,
        "node": NODE,
        "model": MODEL,
        "state": "serving",
        "restarts": 0,
        "phases": COLD_START,
        "total": COLD_START_TOTAL,
    }
    # llama-70b-1: Events before its pod; created 18, scheduled 20, image present, started 30.
    pending = tl["llama-70b-1"]
    assert pending["phases"] == {
        "scheduling": 2.0,  # 20 − 18
        "init": None,
        "image_pull": 0.0,  # already present
        "container_start": 10.0,  # 30 − scheduled 20 (nothing pulled)
        "engine_init": None,  # not Ready: null, not 0
        "first_token": None,
    }
    assert (pending["state"], pending["total"], pending["node"]) == (
        "engine_init", None, "gpu-node-8")  # fmt: skip
    # Every line is JSON; transitions come before the timelines, in clock order.
    lines = _json_lines(r.stdout)
    kinds = [o["kind"] for o in lines]
    assert kinds[-2:] == ["timeline", "timeline"]
    assert set(kinds[:-2]) == {"transition"}
    times = [o["at"] for o in lines if o["kind"] == "transition"]
    assert times == sorted(times)
    ours = [(o["from"], o["to"]) for o in lines
            if o["kind"] == "transition" and o["pod"] == "llama-70b-0"]  # fmt: skip
    assert ours[0] == (None, "scheduling")
    assert ours[-3:] == [("container_start", "engine_init"), ("engine_init", "ready"),
                         ("ready", "serving")]  # fmt: skip


def test_until_cuts_the_clock() -> None:
    r = run_replay_cli(["-o", "json", "--until", at(400), COLD])
    assert r.returncode == 0
    t = _timelines(r.stdout)["llama-70b-0"]
    assert t["state"] == "engine_init"  # started at 289, Ready (525) is after the cut
    assert t["phases"] == {**COLD_START, "engine_init": None, "first_token": None}
    assert t["total"] is None
    transitions = [o for o in _json_lines(r.stdout) if o["kind"] == "transition"]
    assert max(o["at"] for o in transitions) <= at(400)


def test_until_between_ready_and_first_token() -> None:
    r = run_replay_cli(["-o", "json", "--until", "2025-03-01T12:08:47+00:00", COLD])  # T0+527
    t = _timelines(r.stdout)["llama-70b-0"]
    assert (t["state"], t["total"]) == ("ready", 525.0)
    assert t["phases"]["first_token"] is None


def test_until_must_be_rfc3339() -> None:
    r = run_replay_cli(["--until", "tomorrow", COLD])
    assert r.returncode == 2
    assert "--until" in r.stderr


def test_text_output_is_readable() -> None:
    r = run_replay_cli([COLD])
    assert (r.returncode, r.stderr) == (0, "")
    out = r.stdout
    assert "2 pods" in out
    blocks = {b.split()[0]: b for b in out.split("\n\n")[1:]}
    assert set(blocks) == {"llm/llama-70b-0", "llm/llama-70b-1", "model"}  # + the summary
    done = blocks["llm/llama-70b-0"]
    assert "state=serving" in done and f"node={NODE}" in done and f"model={MODEL}" in done
    for phase, value in {**COLD_START, "total": COLD_START_TOTAL}.items():
        rows = [line for line in done.splitlines() if line.split()[:1] == [phase]]
        if value is None:  # `init` of a pod without init containers: no row
            assert rows == []
            continue
        (row,) = rows
        assert f"{value:.1f}s" in row
    pending = blocks["llm/llama-70b-1"]
    assert "state=engine_init" in pending
    (row,) = [line for line in pending.splitlines() if line.split()[:1] == ["engine_init"]]
    assert row.split()[1] == "-"  # not reached


def test_events_and_pods_in_separate_files(tmp_path: Path) -> None:
    """Events first (one file), then the pod list (another): file order is replay order."""
    events = tmp_path / "events.jsonl"
    pods = tmp_path / "pods.jsonl"
    for src, dst in (
        (K8S / "eventlist_default_redis_k8s-v1.31_minikube.json", events),
        (K8S / "podlist_redis_statefulset_k8s-v1.31_minikube.json", pods),
    ):
        dst.write_bytes(orjson.dumps(orjson.loads(src.read_bytes())) + b"\n")  # fmt: skip
    r = run_replay_cli(["-o", "json", str(events), str(pods)])
    assert (r.returncode, r.stderr) == (0, "")
    tl = [o for o in _json_lines(r.stdout) if o["kind"] == "timeline"]
    by_uid = {o["uid"]: o for o in tl}
    assert len(tl) == 3  # redis-0 twice (recreated: two UIDs), redis-1
    new = by_uid["5c3d5e63-5fb6-4545-aa5b-a52d0f9b0016"]
    assert new["phases"] == {"scheduling": 0.0, "init": None, "image_pull": 2.0,
                             "container_start": 0.0, "engine_init": 1.0,
                             "first_token": None}  # fmt: skip
    assert new["total"] == 5.0  # Ready 11:08:58 − created 11:08:53


def test_stdin_dash() -> None:
    import subprocess

    from tests.replay.conftest import _replay_argv

    data = (DATA / "cold_start_70b.jsonl").read_bytes()
    r = subprocess.run([*_replay_argv(), "-o", "json", "-"], input=data, capture_output=True,
                       cwd=REPO, timeout=120)  # fmt: skip
    assert r.returncode == 0
    assert _timelines(r.stdout.decode())["llama-70b-0"]["phases"] == COLD_START


def test_missing_file_is_a_usage_error() -> None:
    r = run_replay_cli(["tests/data/no-such-file.jsonl"])
    assert r.returncode == 2
    assert "no-such-file.jsonl" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    """`remediator replay ... | head`: a closed pipe ends the replay quietly, exit 0."""
    from tests.simstream import watch_stream

    big = tmp_path / "big.jsonl"
    big.write_bytes(b"\n".join(line for line, _ in watch_stream(300, seed=3)) + b"\n")
    proc = subprocess.Popen(
        [*_replay_argv(), "-o", "json", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert b'"kind":"transition"' in first and b"Traceback" not in err
