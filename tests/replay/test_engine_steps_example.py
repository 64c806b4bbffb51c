"""The README's engine-init example: `remediator replay` shows vLLM's steps under engine_init."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "engine-init-steps.jsonl"


def replay(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "remediator", "replay", *args, str(EXAMPLE)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return proc.stdout


def test_json_timeline_carries_the_steps() -> None:
    (timeline,) = [
        d for d in map(orjson.loads, replay("-o", "json").splitlines()) if d["kind"] == "timeline"
    ]
    steps = timeline["engine_init_steps"]
    assert list(steps) == [
        "weights",
        "torch_compile",
        "memory_profiling",
        "cuda_graphs",
        "api_server",
        "until_ready",
    ]
    assert sum(steps.values()) == timeline["phases"]["engine_init"] == 236.0
    # V1 logs nothing between sizing its KV cache and the end of graph capture.
    assert timeline["engine_init_detail"]["kv_cache"] == "1,587,648 tokens"


def test_text_shows_the_steps_and_where_a_stalled_init_is() -> None:
    done = replay()
    assert " · weights            41.0s" in done and " · cuda_graphs        37.0s" in done
    stalled = replay("--until", "2025-03-01T12:06:00Z")
    assert "state=engine_init" in stalled
    assert " · kv_cache               … in progress  1,587,648 tokens" in stalled
    assert " · kv_cache               -  1,587,648 tokens (timed with the next step)" in done
