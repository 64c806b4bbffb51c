"""Both Event APIs (core/v1 and events.k8s.io/v1), on generated Events and the real v1.31 lists."""

from __future__ import annotations

import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.events import USED_REASONS
from remediator.inputs.records import InputError, PodEvent
from remediator.inputs.timefmt import parse_time
from tests.data import CAPTURES
from tests.timeline.streams import NS, POD, UID, at, event, new_event, watch

K8S = CAPTURES / "k8s"


def _one(doc: dict[str, object]) -> PodEvent:
    items = decode(orjson.dumps(doc))
    assert len(items) == 1
    assert isinstance(items[0], PodEvent)
    return items[0]


def test_core_v1_event() -> None:
    ev = _one(watch(event("Pulling", 'Pulling image "x"', 13, last=20, count=3), "ADDED"))
    assert (ev.watch, ev.namespace, ev.pod, ev.pod_uid) == ("ADDED", NS, POD, UID)
    assert (ev.reason, ev.message, ev.container) == ("Pulling", 'Pulling image "x"', "vllm")
    assert ev.first == parse_time(at(13))
    assert ev.last == parse_time(at(20))
    assert ev.at == ev.last  # the clock follows lastTimestamp
    assert ev.count == 3


def test_events_k8s_io_v1_event_microtime_and_series() -> None:
    doc = new_event("Pulled", 'Successfully pulled image "x" in 1s', 40.123456, series=(4, 70.5))
    ev = _one(watch(doc, "MODIFIED"))
    assert (ev.namespace, ev.pod, ev.pod_uid, ev.container) == (NS, POD, UID, "vllm")
    assert ev.message == 'Successfully pulled image "x" in 1s'  # from `note`
    assert ev.first == pytest.approx(parse_time(at(0)) + 40.123456, abs=1e-6)  # eventTime
    assert ev.last == parse_time(at(70.5))  # series.lastObservedTime
    assert ev.count == 4


def test_events_k8s_io_v1_without_series() -> None:
    ev = _one(new_event("Scheduled", "Successfully assigned llm/p to n", 12, container=None))
    assert ev.first == ev.last == parse_time(at(12))
    assert ev.count == 1
    assert ev.container is None


def test_core_v1_event_with_only_event_time() -> None:
    """core/v1 view of an Event written through events.k8s.io: null first/lastTimestamp."""
    doc = event("Started", "Started container vllm", 0)
    doc.update(firstTimestamp=None, lastTimestamp=None, eventTime=at(289.5))
    ev = _one(doc)
    assert ev.first == ev.last == parse_time(at(289.5))


def test_event_about_another_kind_is_not_a_pod_event() -> None:
    doc = event("ScalingReplicaSet", "Scaled up", 1)
    doc["involvedObject"] = {"kind": "Deployment", "namespace": NS, "name": "d"}
    assert decode(orjson.dumps(doc)) == []


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("involvedObject"),
        lambda d: d["involvedObject"].pop("name"),
        lambda d: d.pop("reason"),
        lambda d: d.update(firstTimestamp="not a time"),
        lambda d: d.update(count="many"),
    ],
)
def test_bad_events_are_input_errors(mutate: object) -> None:
    doc = event("Pulling", "Pulling image", 1)
    mutate(doc)  # type: ignore[operator]
    with pytest.raises(InputError):
        decode(orjson.dumps(doc))


def _eventlist(name: str) -> list[PodEvent]:
    items = decode((K8S / name).read_bytes())
    assert all(isinstance(i, PodEvent) for i in items)
    return [i for i in items if isinstance(i, PodEvent)]


def test_real_default_eventlist() -> None:
    raw = orjson.loads((K8S / "eventlist_default_redis_k8s-v1.31_minikube.json").read_bytes())
    about_pods = [e for e in raw["items"] if e["involvedObject"]["kind"] == "Pod"]
    pod_items = [e for e in about_pods if e["reason"] in USED_REASONS]
    events = _eventlist("eventlist_default_redis_k8s-v1.31_minikube.json")
    # Node, PVC and StatefulSet Events are not about pods, and Created/Killing tell the
    # timeline nothing: dropped, not errors.
    assert len(about_pods) == 18
    assert len(events) == len(pod_items) == 14
    for ev, src in zip(events, pod_items, strict=True):
        assert ev.reason == src["reason"]
        assert ev.pod_uid == src["involvedObject"]["uid"]
        assert ev.first == parse_time(src["firstTimestamp"])
        assert ev.last == parse_time(src["lastTimestamp"])
    pulled = [e for e in events if e.reason == "Pulled"]
    assert [e.container for e in pulled] == ["redis", "redis", "redis"]
    # redis-0 was deleted and recreated by its StatefulSet: two UIDs under one name.
    assert {e.pod_uid for e in events if e.pod == "redis-0"} == {
        "77b1cabd-5fcd-4e89-b178-5fa643fc571f",
        "5c3d5e63-5fb6-4545-aa5b-a52d0f9b0016",
    }


def test_real_kube_system_eventlist_count_bump() -> None:
    events = _eventlist("eventlist_kube-system_k8s-v1.31_minikube.json")
    # storage-provisioner's Pulled was recorded twice (count 2): first 10:19:46, last 10:20:18.
    sp = [e for e in events if e.pod == "storage-provisioner" and e.reason == "Pulled"]
    assert len(sp) == 1
    assert sp[0].count == 2
    assert sp[0].last - sp[0].first == 32.0  # 10:20:18 − 10:19:46  # type: ignore[operator]
