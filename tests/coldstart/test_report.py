"""Workloads, P50/P95 per phase and a pod not Ready against its siblings, on recorded streams."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.coldstart.report import Spread, spread, waiting, workload_of, workloads
from remediator.inputs.decode import decode
from remediator.inputs.timefmt import parse_time
from tests.coldstart.support import (
    HUNG,
    INCIDENT,
    REDIS_EVENTS,
    REDIS_PODS,
    REPO,
    STEPS,
    snapshot_of,
)
from tests.replay.conftest import run_replay_cli
from tests.timeline import streams

CRASHLOOP = REPO / "tests/data/cluster/crashloop_and_delete_k8s-v1.36.3_kwok-v0.8.0.jsonl"
MID_HANG = "2026-12-01T05:57:36Z"  # the hung pod 6 s into engine init; serve deleted it at 10 s


def test_a_pod_hung_in_engine_init_is_told_against_its_ready_siblings() -> None:
    snap = snapshot_of(HUNG, until=MID_HANG)
    (w,) = workloads(snap.timelines())
    assert w.name == "deploy/vllm-hang"  # ReplicaSet vllm-hang-d6b447899, hash cut off
    assert len(w.pods) == 3
    now = parse_time(MID_HANG)
    told = [x for t in w.pods if (x := waiting(t, w, now)) is not None]
    assert [x.pod.name for x in told] == ["vllm-hang-d6b447899-7gzjz"]
    (hung,) = told
    assert hung.phase == "engine_init"
    assert hung.for_s == 6.0  # its engine started at 05:57:30 (containerStatuses startedAt)
    assert (hung.siblings.p50, hung.siblings.p95, hung.siblings.pods) == (3.0, 3.0, 2)
    assert hung.slower
    assert hung.sentence() == (
        "engine_init for 6.0s; siblings P50 3.0s, P95 3.0s (2 pods): longer than 95% of them"
    )


def test_the_workload_figures_are_the_ready_pods_phases() -> None:
    snap = snapshot_of(HUNG)  # to the end: the hung pod deleted, its replacement Ready
    (w,) = workloads(snap.timelines())
    phases = w.phases()
    engine = sorted(v for t in w.pods if (v := t.phases()["engine_init"]) is not None)
    assert engine == [3.0, 3.0, 4.0]  # as replay prints them for this recording
    assert (phases["engine_init"].p50, phases["engine_init"].p95) == (3.0, 4.0)
    assert phases["engine_init"].pods == 3
    assert phases["first_token"].pods == 0 and phases["first_token"].p50 is None
    assert w.states() == {"ready": 3}


def test_a_pod_waiting_for_gpus_says_what_the_scheduler_said() -> None:
    snap = snapshot_of(INCIDENT, namespace="inference-canary")
    groups = workloads(snap.timelines())
    now = snap.clock
    told = [x for w in groups for t in w.pods if (x := waiting(t, w, now)) is not None]
    gpu = [x for x in told if x.phase == "scheduling"]
    assert gpu, told
    for x in gpu:
        assert "Insufficient nvidia.com/gpu" in x.why
        assert x.why.startswith("scheduler: ")
        assert x.for_s is not None and x.for_s == now - (x.pod.created or math.nan)


def test_a_pod_mid_engine_init_names_its_vllm_step() -> None:
    snap = snapshot_of(STEPS, until="2025-03-01T12:06:00Z")
    (w,) = workloads(snap.timelines())
    (t,) = w.pods
    x = waiting(t, w, parse_time("2025-03-01T12:06:00Z"))
    assert x is not None and x.phase == "engine_init"
    replayed = run_replay_cli(["--until", "2025-03-01T12:06:00Z", str(STEPS)])
    (step,) = re.findall(r"^ · (\w+) +… in progress", replayed.stdout, re.M)  # replay's answer
    assert x.why == f"in vLLM step {step}"
    assert x.siblings.pods == 0
    assert "no sibling has finished it yet" in x.sentence()
    assert not x.slower


def test_a_statefulset_is_one_workload() -> None:
    snap = snapshot_of(REDIS_PODS, REDIS_EVENTS)
    names = {workload_of(t) for t in snap.timelines()}
    assert names == {"sts/redis"}, names


@given(st.lists(st.floats(0, 1e5, allow_nan=False) | st.none(), max_size=60))
def test_spread_is_nearest_rank_over_the_pods_that_finished(values: list[float | None]) -> None:
    s = spread(values)
    done = sorted(v for v in values if v is not None)
    assert s.pods == len(done)
    if not done:
        assert s.p50 is None and s.p95 is None
        return
    assert s.p50 in done and s.p95 in done
    assert s.p50 <= s.p95
    # nearest rank: at least half (95%) of the pods took no longer
    assert sum(v <= s.p50 for v in done) >= 0.5 * len(done)
    assert sum(v <= s.p95 for v in done) >= 0.95 * len(done)
    assert sum(v < s.p50 for v in done) < 0.5 * len(done)


def test_a_crash_looping_pod_says_how_often_it_restarted() -> None:
    until = "2026-12-01T06:05:53Z"  # restarted twice, waiting out its back-off (recorded)
    snap = snapshot_of(CRASHLOOP, until=until)
    groups = workloads(snap.timelines())
    crashy = next(w for w in groups if w.name == "deploy/vllm-crashy")
    (t,) = [t for t in crashy.pods if t.restarts]
    x = waiting(t, crashy, parse_time(until))
    assert x is not None and x.phase == "engine_init"
    assert x.why == "the engine restarted 2 times"


def test_nearest_rank_by_hand() -> None:
    assert spread([float(v) for v in range(1, 21)]) == Spread(10.0, 19.0, 20)  # ranks 10, 19
    assert spread([float(v) for v in range(1, 101)]) == Spread(50.0, 95.0, 100)
    assert spread([3.0, None, 1.0, 2.0]) == Spread(2.0, 3.0, 3)  # ranks 2 and 3 of 3
    assert spread([None, None]) == Spread(None, None, 0)


@pytest.mark.parametrize(
    ("status", "why"),
    [
        ("ImagePullBackOff", "container waiting: ImagePullBackOff"),
        (None, "the image pull is backing off"),  # the Events know before the pod's status
    ],
)
def test_a_pod_backing_off_its_image_pull_says_so(status: str | None, why: str) -> None:
    snap = snapshot_of()
    pulling = streams.event("Pulling", 'Pulling image "vllm/vllm-openai:v0.8.5"', 13)
    failed = streams.event("Failed", "Error: ImagePullBackOff", 40)
    waiting_pod = streams.pod(scheduled=12, waiting=status)
    items = [i for doc in (waiting_pod, pulling, failed) for i in decode(json.dumps(doc))]
    snap.uids.add(streams.UID)
    snap.feed(items)
    (w,) = workloads(snap.timelines())
    (t,) = w.pods
    now = streams.T0_EPOCH + 100
    x = waiting(t, w, now)
    assert x is not None and x.phase == "image_pull"
    assert x.why == why
    assert x.for_s == 100 - 13  # since the first Pulling
