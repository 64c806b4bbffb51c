"""The example vLLM Deployment from deploy/examples scales up on kwok GPU nodes: what serve
exports, and what replay makes of the recorded watch stream, match the stage delays."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.live.harness import (
    NS,
    LiveCluster,
    Recorder,
    Serve,
    example_deployment,
    replay,
    wait_for,
)
from tests.live.test_incidents import ready

SHAPE = {"pull": "3s", "init": "1s", "start": "2s", "engine": "4s"}
# Stage delays per phase, in seconds, in the kubelet's order (issue 18, #13): the example's init
# container runs first (scheduled -> Initialized), then the main image is pulled, the container
# created and started. (Before, the stages pulled first and ran init during the pull, so init's
# run was counted in container start and a pod still Initialized=False looked past init.)
EXPECTED = {"init": 1.0, "image_pull": 3.0, "container_start": 2.0, "engine_init": 4.0}
TOLERANCE_S = 1.0
# Events outlive their pods by an hour, so serve also sees earlier tests' pods, from their Events
# alone and without a model: the pods of this test are told apart by their model.
MODEL = "/models/Llama-3.1-70B-Instruct"


def test_serve_and_replay_see_the_stage_delays_within_a_second_per_phase(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    sel = "app.kubernetes.io/name=vllm-timeline"
    s = serve()
    with Recorder(cluster, tmp_path / "timeline.jsonl") as rec:
        workloads(example_deployment("vllm-timeline", replicas=3, shape=SHAPE))
        wait_for(
            lambda: (ps := cluster.pods(NS, sel)) and len(ps) == 3 and all(map(ready, ps)),
            90,
            "three Ready pods",
        )
        wait_for(
            lambda: (
                s.sample(
                    "remediator_cold_start_phase_seconds_count", phase="engine_init", model=MODEL
                )
                >= 3
            ),
            30,
            "serve closed three engine inits",
        )
        rec.wait_until(
            lambda docs: len({
                d["object"]["metadata"]["uid"] for d in docs
                if d["object"]["kind"] == "Pod"
                and d["object"]["metadata"]["name"].startswith("vllm-timeline")
                and ready(d["object"])
            }) >= 3,
            30,
            "the recorded watch to show three Ready pods",
        )  # fmt: skip
    for phase, want in EXPECTED.items():
        count = s.sample("remediator_cold_start_phase_seconds_count", phase=phase, model=MODEL)
        total = s.sample("remediator_cold_start_phase_seconds_sum", phase=phase, model=MODEL)
        assert count >= 3, phase
        assert total / count == pytest.approx(want, abs=TOLERANCE_S), phase
    lines = replay(rec.path, "stuck_pod: {selector: app=vllm-inference}\n", tmp_path)
    timelines = {
        t["pod"]: t
        for t in lines
        if t["kind"] == "timeline" and t["pod"].startswith("vllm-timeline")
    }
    assert len(timelines) == 3
    for pod, t in timelines.items():
        assert t["state"] == "ready", (pod, t)
        for phase, want in EXPECTED.items():
            assert t["phases"][phase] == pytest.approx(want, abs=TOLERANCE_S), (pod, phase, t)
