"""The phase rules of issue 2, one test each, on generated streams (times: seconds after T0)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from remediator.timeline import Tracker, timelines_from
from remediator.timeline.model import PodTimeline
from tests.timeline.streams import (
    COLD_START,
    COLD_START_TOTAL,
    IMAGE,
    MODEL,
    NODE,
    NS,
    POD,
    UID,
    cloudevent,
    cold_start,
    event,
    first_token,
    jsonl,
    new_event,
    pod,
    pulled,
    watch,
)


def run(objs: list[Any]) -> Tracker:
    return timelines_from(jsonl(objs).splitlines())


def only(objs: list[Any]) -> PodTimeline:
    tracker = run(objs)
    assert len(tracker) == 1
    (t,) = tracker
    return t


def assert_counts(tracker: Tracker) -> None:
    """The pods-per-state gauge agrees with the timelines' own states."""
    want = Counter((t.namespace, t.state()) for t in tracker)
    assert tracker.in_state == dict(want)


def test_realistic_cold_start() -> None:
    t = only(cold_start())
    assert t.phases() == COLD_START
    assert t.total() == COLD_START_TOTAL
    assert (t.state(), t.node, t.model, t.tp_size, t.gpu_util) == (
        "serving", NODE, MODEL, "2", "0.92")  # fmt: skip


def test_scheduling_from_the_condition_over_the_event() -> None:
    t = only([
        watch(pod(), "ADDED"),
        watch(event("Scheduled", f"Successfully assigned {NS}/{POD} to {NODE}", 15,
                    container=None)),
        watch(pod(scheduled=12)),  # the API server's condition wins: 12 − 0
    ])  # fmt: skip
    assert t.phases()["scheduling"] == 12.0


def test_scheduling_from_the_event_without_the_condition() -> None:
    t = only([
        watch(pod(conditions=False), "ADDED"),
        watch(event("Scheduled", f"Successfully assigned {NS}/{POD} to node-b", 7,
                    container=None)),
    ])  # fmt: skip
    assert t.phases()["scheduling"] == 7.0  # Scheduled 7 − created 0
    assert t.node == "node-b"  # from the message: the pod has no nodeName yet
    assert t.state() == "container_start"


def test_image_pull_first_pulling_to_last_pulled() -> None:
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulling", 'Pulling image "fetch:1"', 11, container="fetch")),
        watch(event("Pulled", pulled("20s"), 31, container="fetch")),
        watch(event("Pulling", f'Pulling image "{IMAGE}"', 32)),
        watch(event("Pulled", pulled("2m", "2m8s"), 160)),
        watch(pod(scheduled=10, started=170)),
    ])  # fmt: skip
    ph = t.phases()
    assert ph["image_pull"] == 160.0 - 11.0  # last Pulled − first Pulling, not a message figure
    assert ph["container_start"] == 170.0 - 160.0


def test_pulled_duration_without_pulling_uses_including_waiting() -> None:
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulled", pulled("2m1.5s", "2m3s", 116976307), 140)),
        watch(pod(scheduled=10, started=150)),
    ])  # fmt: skip
    ph = t.phases()
    assert ph["image_pull"] == 123.0  # "(2m3s including waiting)", not the 121.5 s pull
    assert ph["container_start"] == 150.0 - 140.0


def test_pulled_duration_without_pulling_and_without_waiting() -> None:
    t = only([watch(pod(scheduled=10), "ADDED"),
              watch(event("Pulled", pulled("49.657983991s"), 60))])  # fmt: skip
    assert t.phases()["image_pull"] == pytest.approx(49.657983991)


def test_old_pulled_without_duration_and_no_pulling_is_unknown() -> None:
    t = only([watch(pod(scheduled=10), "ADDED"),
              watch(event("Pulled", f'Successfully pulled image "{IMAGE}"', 60))])  # fmt: skip
    assert t.phases()["image_pull"] is None  # a pull happened; its length is not known


def test_image_pull_zero_when_every_image_was_present() -> None:
    present = f'Container image "{IMAGE}" already present on machine'
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulled", 'Container image "fetch:1" already present on machine', 11,
                    container="fetch")),
        watch(event("Pulled", present, 12)),
        watch(pod(scheduled=10, started=14, ready=50)),
    ])  # fmt: skip
    ph = t.phases()
    assert ph["image_pull"] == 0.0
    assert ph["container_start"] == 14.0 - 10.0  # from scheduling: nothing was pulled
    assert ph["engine_init"] == 50.0 - 14.0


def test_image_pull_not_zero_when_one_image_was_pulled() -> None:
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulled", 'Container image "fetch:1" already present on machine', 11,
                    container="fetch")),
        watch(event("Pulling", f'Pulling image "{IMAGE}"', 12)),
        watch(event("Pulled", pulled("30s", "30s"), 42)),
    ])  # fmt: skip
    assert t.phases()["image_pull"] == 42.0 - 12.0


def test_engine_init_is_ready_minus_started() -> None:
    t = only([watch(pod(scheduled=1, started=100.5, ready=336.75))])
    ph = t.phases()
    assert ph["engine_init"] == 336.75 - 100.5
    assert ph["first_token"] is None
    assert t.total() == 336.75  # no first token: Ready − created
    assert t.state() == "ready"


def test_first_token_observation() -> None:
    t = only([watch(pod(scheduled=1, started=100, ready=300)), first_token(304.5)])
    assert t.phases()["first_token"] == 4.5
    assert t.total() == 304.5  # first token − created
    assert t.state() == "serving"


def test_first_token_by_uid_picks_that_pod() -> None:
    other = "uid-other"
    tracker = run([
        watch(pod(scheduled=1, started=100, ready=300)),
        watch(pod(uid=other, name="llama-70b-1", scheduled=1, started=90, ready=200)),
        first_token(250, uid=other, name="llama-70b-1"),
    ])  # fmt: skip
    t = {x.uid: x for x in tracker}
    assert t[other].phases()["first_token"] == 50.0
    assert t[UID].first_token is None


def test_first_token_via_cloudevent() -> None:
    ce = cloudevent({"namespace": NS, "pod": POD}, time="2025-03-01T12:05:10Z")
    t = only([watch(pod(scheduled=1, started=100, ready=300)), ce])
    assert t.phases()["first_token"] == 310.0 - 300.0  # 12:05:10 is T0 + 310


def test_first_token_before_ready_is_zero_not_negative() -> None:
    t = only([watch(pod(scheduled=1, started=100, ready=300)), first_token(299.2)])
    assert t.phases()["first_token"] == 0.0  # clock skew between probe and API server


def test_first_token_for_an_unknown_pod_is_dropped() -> None:
    tracker = run([first_token(5, name="nobody")])
    assert len(tracker) == 0


def test_container_start_from_the_started_event_until_the_pod_shows() -> None:
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulling", "Pulling image", 11)),
        watch(event("Pulled", pulled("9s"), 20)),
        watch(event("Started", "Started container: vllm", 25)),
    ])  # fmt: skip
    assert t.phases()["container_start"] == 5.0
    assert t.state() == "engine_init"


def test_restarts_keep_the_first_run_for_the_cold_start() -> None:
    """The first run crashed (OOM during engine init); the second became Ready."""
    t = only([
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulling", "Pulling image", 11)),
        watch(event("Pulled", pulled("30s"), 41)),
        watch(pod(scheduled=10, started=45)),
        watch(event("Pulling", "Pulling image", 200)),  # imagePullPolicy Always: a re-pull
        watch(event("Pulled", pulled("1s"), 201)),
        watch(pod(scheduled=10, started=205, restarts=1)),
        watch(pod(scheduled=10, started=205, ready=400, restarts=1)),
    ])  # fmt: skip
    ph = t.phases()
    assert ph["image_pull"] == 41.0 - 11.0  # the restart's re-pull does not stretch it
    assert ph["container_start"] == 45.0 - 41.0  # the first start
    assert ph["engine_init"] == 400.0 - 205.0  # the run that became Ready
    assert t.restarts == 1
    assert t.total() == 400.0


def test_node_from_the_pod() -> None:
    t = only([watch(pod(scheduled=3, node="gpu-node-9"))])
    assert t.node == "gpu-node-9"


def test_model_from_label_and_vllm_serve() -> None:
    t = only([watch(pod(args=[], labels={"model": "llama-from-label"}))])
    assert t.model == "llama-from-label"
    t = only([watch(pod(command=["vllm", "serve", "Qwen/Qwen2-72B"], args=["-tp", "4"]))])
    assert (t.model, t.tp_size) == ("Qwen/Qwen2-72B", "4")


@pytest.mark.parametrize(
    ("stream", "state"),
    [
        ([watch(pod(conditions=False), "ADDED")], "scheduling"),
        ([watch(pod(scheduled=5, waiting="ContainerCreating"))], "container_start"),
        ([watch(pod(scheduled=5)), watch(event("Pulling", "Pulling image", 6))], "image_pull"),
        ([watch(pod(scheduled=5, waiting="ImagePullBackOff"))], "image_pull"),
        ([watch(pod(scheduled=5, started=9))], "engine_init"),
        ([watch(pod(scheduled=5, started=9, ready=20))], "ready"),
        ([watch(pod(scheduled=5, phase="Failed"))], "failed"),
        ([watch(pod(scheduled=5, started=9)), watch(pod(scheduled=5, started=9), "DELETED")],
         "deleted"),
    ],
)  # fmt: skip
def test_current_state_of_unfinished_pods(stream: list[Any], state: str) -> None:
    tracker = run(stream)
    (t,) = tracker
    assert t.state() == state
    assert_counts(tracker)


def test_unschedulable_message_kept_until_scheduled() -> None:
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    t = only([watch(pod(conditions=False), "ADDED"),
              watch(event("FailedScheduling", msg, 1, container=None))])  # fmt: skip
    assert (t.state(), t.unschedulable) == ("scheduling", msg)
    t = only([watch(pod(conditions=False), "ADDED"),
              watch(event("FailedScheduling", msg, 1, container=None)),
              watch(pod(scheduled=12))])  # fmt: skip
    assert t.unschedulable is None


def test_events_k8s_io_v1_stream_gives_the_same_phases() -> None:
    t = only([
        watch(pod(conditions=False), "ADDED"),
        watch(new_event("Scheduled", f"Successfully assigned {NS}/{POD} to {NODE}", 12,
                        container=None)),
        watch(new_event("Pulling", f'Pulling image "{IMAGE}"', 13)),
        watch(new_event("Pulled", pulled("3m2s", "3m2s"), 195)),
        watch(new_event("Started", "Started container vllm", 289)),
        watch(pod(scheduled=12, started=289, ready=525)),
        first_token(530),
    ])  # fmt: skip
    assert t.phases() == COLD_START
    assert t.total() == COLD_START_TOTAL


def test_recreated_pod_with_the_same_name_is_a_new_timeline() -> None:
    new = "uid-recreated"
    tracker = run([
        *cold_start(),
        watch(pod(scheduled=12, started=289, ready=525), "DELETED"),
        watch(pod(uid=new, created=600, scheduled=601), "ADDED"),
        watch(event("Pulled", f'Container image "{IMAGE}" already present on machine', 602,
                    uid=new)),
        watch(pod(uid=new, created=600, scheduled=601, started=605, ready=700)),
        first_token(701),  # by name: the newest pod of that name
    ])  # fmt: skip
    t = {x.uid: x for x in tracker}
    assert t[UID].phases() == COLD_START  # the first pod's timeline is untouched
    assert t[UID].state() == "deleted"
    assert t[new].phases() == {
        "scheduling": 1.0,  # 601 − 600
        "init": None,
        "image_pull": 0.0,  # present
        "container_start": 4.0,  # 605 − scheduled 601
        "engine_init": 95.0,  # 700 − 605
        "first_token": 1.0,  # 701 − 700
    }
    assert t[new].total() == 101.0
    assert_counts(tracker)


def test_recreated_pod_after_a_missed_delete_supersedes_the_old_one() -> None:
    """A watch gap lost the old pod's DELETED; the new pod of that name proves it is gone."""
    new = "uid-recreated"
    for stream in (
        [watch(pod(scheduled=5, started=9)), watch(pod(uid=new, created=600), "ADDED")],
        [watch(pod(uid=new, created=600), "ADDED"), watch(pod(scheduled=5, started=9))],
    ):
        tracker = run(stream)
        t = {x.uid: x for x in tracker}
        assert t[UID].state() == "deleted"  # not engine_init forever
        assert t[UID].phases()["container_start"] == 4.0  # 9 − 5: facts untouched
        assert t[new].state() == "scheduling"
        assert tracker.current(NS, POD) is t[new]
        assert_counts(tracker)


def test_events_without_uid_before_their_pod_are_adopted() -> None:
    """Events that carry no involvedObject.uid and arrive before any pod object start an
    orphan timeline; the pod adopts its facts, and the per-state gauge counts it once."""
    tracker = run([
        watch(event("Scheduled", f"Successfully assigned {NS}/{POD} to {NODE}", 12,
                    uid=None, container=None)),
        watch(event("Pulling", f'Pulling image "{IMAGE}"', 13, uid=None)),
        watch(event("Pulled", pulled("3m2s", "3m2s"), 195, uid=None)),
        watch(pod(scheduled=12, waiting="ContainerCreating")),
    ])  # fmt: skip
    (t,) = tracker
    assert t.uid == UID
    assert t.phases()["image_pull"] == 182.0
    assert t.state() == "container_start"
    assert_counts(tracker)
    tracker.forget(UID)
    assert tracker.in_state == {}


def test_events_without_uid_adopted_then_state_changes() -> None:
    tracker = run([
        watch(event("Pulling", f'Pulling image "{IMAGE}"', 13, uid=None)),  # orphan: image_pull
        watch(pod(scheduled=12, started=289, ready=525)),  # adopted, and ready at once
    ])  # fmt: skip
    assert [t.state() for t in tracker] == ["ready"]
    assert_counts(tracker)
