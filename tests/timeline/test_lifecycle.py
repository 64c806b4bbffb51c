"""Init containers, restarts, finished and terminating pods, back-offs that ended, and
clock skew, on real captures (tests/data/README.md says where each came from)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from remediator.inputs.timefmt import format_time, parse_time
from remediator.timeline import PodTimeline, Tracker, timelines_from
from tests.timeline.real_captures import (
    KSERVE_UID,
    kserve_events,
    kserve_pod,
    load,
)
from tests.timeline.streams import IMAGE, event, jsonl, pod, pulled, watch

OBSERVED = parse_time("2026-07-03T22:55:00Z")


def only(objs: list[Any], tracker: Tracker | None = None) -> PodTimeline:
    (t,) = timelines_from([jsonl([o]) for o in objs], tracker)
    return t


def by_name(doc: Any) -> dict[str, PodTimeline]:
    return {t.name: t for t in timelines_from([orjson.dumps(doc)])}


# ---- init containers -------------------------------------------------------------------
def test_init_containers_of_a_real_pod_get_their_own_phase() -> None:
    """OpenShift CI pod (cri-o): two init containers done at 17:47:17, the main container
    `test` started 17:47:24, Ready 17:47:26. The init run is not billed to the engine."""
    t = by_name(load("pod_init_containers_openshift-ci_cri-o_2021.json"))[
        "launch-osd-create-create"
    ]
    assert t.main_container == "test"  # no GPUs: the first container
    assert t.phases() == {
        "scheduling": 0.0,  # PodScheduled 17:47:12 − created 17:47:12
        "init": 5.0,  # Initialized 17:47:17 − scheduled 17:47:12
        "image_pull": None,  # no pull events in the capture
        "container_start": 7.0,  # started 17:47:24 − init done 17:47:17
        "engine_init": 2.0,  # Ready 17:47:26 − 17:47:24
        "first_token": None,
    }
    assert t.total() == 14.0
    assert t.state() == "ready"


def test_kserve_storage_initializer_downloading_is_init_not_engine_init() -> None:
    """The real storage-initializer Events (kubelet v1.36 message forms, fieldPath
    spec.initContainers{storage-initializer}) and the pod in PodInitializing."""
    events = kserve_events(OBSERVED)
    for order in (events + [kserve_pod(OBSERVED - 53, OBSERVED - 52)],
                  [kserve_pod(OBSERVED - 53, OBSERVED - 52)] + events):  # fmt: skip
        t = only(order)
        assert t.uid == KSERVE_UID and t.main_container == "kserve-container"
        assert t.state() == "init"
        assert t.state_since() == OBSERVED - 52  # scheduled
        ph = t.phases()
        assert ph["image_pull"] is None  # the init container's pull is init's
        assert ph["init"] is None  # still running
        assert t.started_first is None


def test_init_events_alone_make_the_init_phase() -> None:
    """Without the pod object: the init container's Started is not the engine's."""
    t = only(kserve_events(OBSERVED))
    assert t.has_init and t.started_first is None
    assert t.state() == "init"


def test_engine_named_by_the_policy_wins_over_gpu_and_order() -> None:
    doc = pod(scheduled=5, started=9)
    doc["spec"]["containers"].append({"name": "engine", "image": "x"})
    doc["status"]["containerStatuses"].append(
        {"name": "engine", "restartCount": 0, "state": {"waiting": {"reason": "X"}}}
    )
    assert only([watch(doc)]).main_container == "vllm"  # the one with GPUs
    t = only([watch(doc)], Tracker(engines=("missing", "engine")))
    assert t.main_container == "engine" and t.state() == "container_start"


def test_a_sidecar_start_event_is_not_the_engine_start() -> None:
    """spec.containers{metrics-sidecar} starts first; the engine (vllm) has not."""
    for objs in (
        [watch(pod(scheduled=5)), watch(event("Started", "Started container", 7,
                                              container="metrics-sidecar"))],
        [watch(event("Started", "Started container", 7, container="metrics-sidecar")),
         watch(pod(scheduled=5))],
    ):  # fmt: skip
        t = only(objs)
        assert t.state() == "container_start" and t.started_first is None


# ---- restarts --------------------------------------------------------------------------
def test_real_crash_loop_counts_from_the_first_start() -> None:
    """Real containerStatuses of a crash-looping container (CrashLoopBackOff, restartCount
    9, lastState.terminated.startedAt): it has run, so it is not waiting to start."""
    doc = pod(scheduled=0)
    doc["spec"]["containers"] = [{"name": "my-ag-ui-app", "image": "x"}]
    doc["status"]["containerStatuses"] = load(
        "containerstatuses_crashloopbackoff_microk8s_2026.json"
    )
    doc["metadata"]["creationTimestamp"] = "2026-03-28T22:50:00Z"
    for c in doc["status"]["conditions"]:
        c["lastTransitionTime"] = "2026-03-28T22:50:01Z"
    t = only([watch(doc)])
    assert t.restarts == 9
    assert t.state() == "engine_init"  # not container_start: it ran
    assert t.started_first == parse_time("2026-03-28T22:56:06Z")  # lastState's start
    assert t.state_since() == parse_time("2026-03-28T22:56:06Z")
    assert t.phases()["container_start"] == 365.0  # 22:56:06 − scheduled 22:50:01
    assert t.waiting_reason == "CrashLoopBackOff"


def test_real_restarted_pods_never_go_negative() -> None:
    """Real pods restarted by node reboots (restartCount 3, init container 11): the status
    shows only the last runs, so the cold start is bounded by what it shows."""
    pods = by_name(load("podlist_restarts_init_minikube_docker_2021.json"))
    nginx, pause = pods["nginx-deployment-dd485bc9-bfgnh"], pods["privileged"]
    for t in (nginx, pause):
        assert t.restarts == 3 and t.state() == "ready"
        assert all(v is None or v >= 0 for v in t.phases().values())
    assert nginx.started_first == parse_time("2021-04-11T10:54:49Z")  # lastState
    assert nginx.phases()["engine_init"] == 0.0  # the run that became Ready: 04:44:06
    # init cannot have ended after the engine's first start, whatever a re-run says
    init = nginx.phases()["init"]
    assert init is not None
    assert init <= parse_time("2021-04-11T10:54:49Z") - parse_time("2021-04-08T06:18:15Z")


def test_a_re_pull_after_a_restart_is_not_the_cold_start_in_any_order() -> None:
    objs = [
        watch(pod(scheduled=10), "ADDED"),
        watch(event("Pulling", "Pulling image", 11)),
        watch(event("Pulled", pulled("30s"), 41)),
        watch(pod(scheduled=10, started=45)),
        watch(event("Pulling", "Pulling image", 200)),
        watch(event("Pulled", pulled("1s"), 201)),
        watch(pod(scheduled=10, started=205, restarts=1)),
    ]
    for order in (objs, list(reversed(objs)), objs[4:] + objs[:4]):
        t = only(order)
        assert t.phases()["image_pull"] == 30.0
        assert t.phases()["container_start"] == 4.0
        assert (t.state(), t.restarts) == ("engine_init", 1)


# ---- pod lifecycle ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phase", "deleting", "state"),
    [("Succeeded", False, "succeeded"), ("Failed", False, "failed"),
     (None, True, "terminating")],
)  # fmt: skip
def test_finished_and_terminating_pods_are_not_in_a_cold_start(
    phase: str | None, deleting: bool, state: str
) -> None:
    doc = pod(scheduled=5, waiting="ContainerCreating", phase=phase)
    if deleting:
        doc["metadata"]["deletionTimestamp"] = format_time(parse_time(doc["metadata"][
            "creationTimestamp"]) + 30)  # fmt: skip
    t = only([watch(doc)])
    assert t.state() == state


# ---- the present, not the past ---------------------------------------------------------
def test_a_back_off_that_a_later_pull_ended_is_history() -> None:
    back_off = f'Back-off pulling image "{IMAGE}"'
    objs = [
        watch(pod(scheduled=5, waiting="ContainerCreating")),
        watch(event("Pulling", "Pulling image", 6)),
        watch(event("BackOff", back_off, 20, last=60, count=4)),
        watch(event("Pulled", pulled("10s"), 90)),
    ]
    for order in (objs, list(reversed(objs))):
        t = only(order)
        assert not t.image_backoff()
        assert t.state() == "container_start"
    t = only(objs[:3])
    assert t.image_backoff() and t.state() == "image_pull"


# ---- clocks ----------------------------------------------------------------------------
REDIS_EVENTS = "eventlist_default_redis_k8s-v1.31_minikube.json"
REDIS_PODS = "podlist_redis_statefulset_k8s-v1.31_minikube.json"
REDIS_1 = "216570cd-df52-4306-a4fc-8910b18327f4"


def _shift_kubelet(skew: float) -> tuple[Any, Any]:
    """The real redis recording with the node's clock `skew` seconds off: every time the
    kubelet stamps moves; the API server's (creationTimestamp, PodScheduled) does not."""
    events, pods = load(REDIS_EVENTS), load(REDIS_PODS)

    def move(ts: str) -> str:
        return format_time(parse_time(ts) + skew)

    for e in events["items"]:
        if e.get("source", {}).get("component") == "kubelet":
            e["firstTimestamp"], e["lastTimestamp"] = (
                move(e["firstTimestamp"]), move(e["lastTimestamp"]))  # fmt: skip
    for p in pods["items"]:
        for c in p["status"]["conditions"]:
            if c["type"] != "PodScheduled":
                c["lastTransitionTime"] = move(c["lastTransitionTime"])
        for s in p["status"]["containerStatuses"]:
            s["state"]["running"]["startedAt"] = move(s["state"]["running"]["startedAt"])
    return events, pods


@pytest.mark.parametrize("skew", [20.0, -20.0])
def test_skewed_kubelet_clock_keeps_total_and_phases_consistent(skew: float) -> None:
    events, pods = _shift_kubelet(skew)
    tracker = timelines_from([orjson.dumps(events), orjson.dumps(pods)])
    t = tracker.get(REDIS_1)
    assert t is not None
    # Without skew (the recording as it is): scheduling 2, pull 2, start 0, init 1 → 6.
    ph = {k: v for k, v in t.phases().items() if v is not None}
    assert ph == {"scheduling": 2.0, "image_pull": 2.0, "container_start": 0.0,
                  "engine_init": 1.0}  # fmt: skip
    # created 10:40:04 → Ready 10:40:10 on the API server's clock: 6 s, of which 1 s
    # (scheduled → first Pulling) is in no phase. Skewed, the phases are exact (each within
    # one clock) and the total is the same but for that second, never 0 nor 26.
    total = t.total()
    assert total is not None and 0.0 <= total - sum(ph.values()) <= 1.0
    assert abs(t.clock_skew() - skew) <= 2.0  # reported
    assert "clock_skew_s" in t.to_json()


def test_real_recording_without_skew_reports_none() -> None:
    tracker = timelines_from([orjson.dumps(load(REDIS_EVENTS)), orjson.dumps(load(REDIS_PODS))])
    assert [t.clock_skew() for t in tracker] == [0.0, 0.0, 0.0]


def test_events_posted_late_at_kubelet_start_are_not_skew() -> None:
    """Real kube-system Events of static pods: the kubelet stamped them 9 s before the API
    server existed to create them. Late delivery is not a clock skew."""
    tracker = timelines_from([orjson.dumps(load("eventlist_kube-system_k8s-v1.31_minikube.json"))])
    assert {t.name: t.clock_skew() for t in tracker if t.clock_skew()} == {}


def test_skew_beyond_the_threshold_is_a_metric_per_node() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from remediator.metrics.export import TrackerCollector

    events, pods = _shift_kubelet(20.0)
    tracker = timelines_from([orjson.dumps(events), orjson.dumps(pods)])
    registry = CollectorRegistry()
    registry.register(TrackerCollector(tracker, lambda: 0.0))
    text = generate_latest(registry).decode()
    (line,) = [x for x in text.splitlines() if x.startswith("remediator_node_clock_skew_seconds{")]
    assert 'node="minikube"' in line and abs(float(line.split()[-1]) - 20.0) <= 2.0
    plain = timelines_from([orjson.dumps(load(REDIS_EVENTS)), orjson.dumps(load(REDIS_PODS))])
    registry = CollectorRegistry()
    registry.register(TrackerCollector(plain, lambda: 0.0))
    assert "remediator_node_clock_skew_seconds{" not in generate_latest(registry).decode()
