"""Restarts and terminating pods on the real control plane (issue 8): kwok plays a crash loop
(lastState, CrashLoopBackOff, a second Started) and a graceful delete (deletionTimestamp); the
recording of the watch, replayed in any order of its two streams, shows the cold start from
the first start, counts the restarts, and never acts on the pod that is going away.

With REMEDIATOR_RECORD_DIR set, the recording is kept there (tests/data/cluster/ holds one)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tests.live.harness import NS, LiveCluster, Recorder, example_deployment, replay, wait_for
from tests.live.test_incidents import ready

CRASHY = {"pull": "2s", "init": "1s", "start": "1s", "engine": "2s", "crash": "true",
          "backoff": "2s"}  # fmt: skip
STEADY = {"pull": "2s", "init": "1s", "start": "1s", "engine": "2s"}
POLICY = "stuck_pod: {selector: app=vllm-inference, checks: 1}\n"


def _restarts(pod: dict[str, Any]) -> int:
    return max((s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", [])),
               default=0)  # fmt: skip


def test_a_crash_loop_and_a_terminating_pod_recorded_and_replayed(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    rec_path = tmp_path / "lifecycle.jsonl"
    with Recorder(cluster, rec_path) as rec:
        workloads(example_deployment("vllm-crashy", replicas=1, shape=CRASHY))
        workloads(example_deployment("vllm-steady", replicas=1, shape=STEADY))
        crashy = "app.kubernetes.io/name=vllm-crashy"
        steady = "app.kubernetes.io/name=vllm-steady"
        wait_for(lambda: (ps := cluster.pods(NS, steady)) and ready(ps[0]), 60, "steady Ready")
        (gone,) = cluster.pods(NS, steady)
        cluster.delete(f"/api/v1/namespaces/{NS}/pods/{gone['metadata']['name']}")
        wait_for(
            lambda: (ps := cluster.pods(NS, crashy)) and _restarts(ps[0]) >= 2, 90, "2 restarts"
        )
        wait_for(
            lambda: all(p["metadata"]["uid"] != gone["metadata"]["uid"]
                        for p in cluster.pods(NS, steady)), 60, "the deleted pod gone",
        )  # fmt: skip
        rec.wait_until(
            lambda docs: (
                any(
                    d["object"]["kind"] == "Pod"
                    and d["object"]["metadata"]["name"].startswith("vllm-crashy")
                    and _restarts(d["object"]) >= 2
                    for d in docs
                )
                and any(
                    d["type"] == "DELETED"
                    and d["object"]["metadata"]["uid"] == gone["metadata"]["uid"]
                    for d in docs
                )
            ),
            30,
            "the recorded watch to show the restarts and the deletion",
        )
    if os.environ.get("REMEDIATOR_RECORD_DIR"):
        shutil.copy(rec_path, Path(os.environ["REMEDIATOR_RECORD_DIR"]) / rec_path.name)
    lines = replay(rec_path, POLICY, tmp_path)
    _check(lines, gone["metadata"]["uid"])
    # The same inputs, the pods' stream first and then the Events': the same picture.
    docs = [orjson.loads(x) for x in rec_path.read_bytes().splitlines()]
    regrouped = tmp_path / "regrouped.jsonl"
    regrouped.write_bytes(b"".join(
        orjson.dumps(d) + b"\n" for d in sorted(docs, key=lambda d: d["object"]["kind"] != "Pod")
    ))  # fmt: skip
    again = replay(regrouped, POLICY, tmp_path)
    assert _timelines(again) == _timelines(lines)


def _timelines(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["uid"]: t for t in lines if t["kind"] == "timeline" and t["uid"]}


def _check(lines: list[dict[str, Any]], gone_uid: str) -> None:
    tl = _timelines(lines)
    (crash,) = [t for t in tl.values() if t["pod"].startswith("vllm-crashy")]
    assert crash["restarts"] >= 2
    assert crash["state"] == "engine_init"  # it has run: not waiting to start
    ph = crash["phases"]
    assert abs(ph["image_pull"] - 2.0) <= 1.0  # the first pull, not stretched by restarts
    assert abs(ph["container_start"] - 2.0) <= 1.0  # init 1 s + start 1 s, to the FIRST start
    assert tl[gone_uid]["state"] == "deleted"
    acted = [d for d in lines if d["kind"] == "decision" and d.get("uid") == gone_uid]
    assert acted == []
