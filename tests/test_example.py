"""The README's first command: replaying the example incident decides what the story says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def replay_example(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remediator", "replay", "--policy", "examples/policy.yaml",
         *extra, "examples/incident-70b.jsonl"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_example_is_what_make_incident_writes() -> None:
    made = subprocess.run(
        [sys.executable, "examples/make_incident.py"], cwd=ROOT, capture_output=True, check=True
    )
    assert made.stdout == (ROOT / "examples" / "incident-70b.jsonl").read_bytes()


def test_the_example_incident_replays_to_the_expected_decisions() -> None:
    proc = replay_example("--output", "json")
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    acts = [(x["action"], x.get("pod") or x.get("daemonset") or x.get("node"))
            for x in lines if x["kind"] == "decision"]  # fmt: skip
    stuck = "vllm-llama-70b-58wrnxw6gp-r4cwh"
    assert ("delete-pod", stuck) in acts
    assert ("notify", "vllm-llama-70b-58wrnxw6gp-mrtgg") in acts  # waits for GPUs: told
    assert not any(a == "delete-pod" and p != stuck for a, p in acts)
    assert ("restart-warmup", "gpu-warmup") in acts
    held = {(x["guardrail"], x["pod"]) for x in lines if x["kind"] == "suppressed"}
    assert ("idempotency", stuck) in held  # the repeated alert
    assert any(x["kind"] == "ignored" and "resolved" in x["reason"] for x in lines)
    timelines = {x["pod"]: x for x in lines if x["kind"] == "timeline"}
    assert len(timelines) == 8
    assert timelines[stuck]["state"] == "engine_init"
    served = [t for t in timelines.values() if t["state"] == "serving"]
    assert len(served) == 2 and all(t["phases"]["first_token"] == 4.0 for t in served)


def test_the_example_text_output_is_for_people() -> None:
    proc = replay_example()
    assert proc.returncode == 0, proc.stderr
    assert "ACT      delete-pod inference/vllm-llama-70b-58wrnxw6gp-r4cwh" in proc.stdout
    assert "engine_init" in proc.stdout and "█" in proc.stdout


def test_the_text_output_ends_with_where_the_time_goes_per_model() -> None:
    proc = replay_example()
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("model "))
    rows = {line.split()[0]: line for line in lines[header + 2 :]}
    llama = rows["meta-llama/Llama-3.1-70B-Instruct"].split()
    assert llama[1] == "7"  # pods of that model
    # engine_init of the 5 llama pods that finished it: 220, 242, 246, 266, 314 (nearest rank)
    assert "246s / 314s" in rows["meta-llama/Llama-3.1-70B-Instruct"]
