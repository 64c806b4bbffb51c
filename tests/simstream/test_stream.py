"""The generator's ground truth against the core, form by form; the stream's own shape."""

from __future__ import annotations

import json
import re
from collections import Counter
from statistics import mean

import kubernetes_validate
import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.records import WorkloadSeen
from remediator.timeline import PodTimeline, timelines_from
from tests.simstream import (
    CREATED_FORMS,
    PULL_FORMS,
    SCENARIOS,
    PodTruth,
    daemonset_event,
    deployment_event,
    tracked_pods,
    watch_stream,
)

# What each Pulled form looks like on the wire: the generator must really write it.
_PULLED = {
    "old": re.compile(r'^Successfully pulled image "[^"]+"$'),
    "in": re.compile(r'^Successfully pulled image "[^"]+" in (\d+m)?\d+(\.\d+)?s$'),
    "waiting": re.compile(
        r"^Successfully pulled image \"[^\"]+\" in \S+s \(\S+s including waiting\)$"
    ),
    "size": re.compile(r"including waiting\)\. Image size: \d+ bytes\.$"),
    "ms": re.compile(r" in \d+ms \(\d+ms including waiting\)"),
    "present": re.compile(r'^Container image "[^"]+" already present on machine$'),
}
_CREATED = {
    "plain": re.compile(r"^Created container vllm$"),
    "colon": re.compile(r"^Created container: vllm$"),
    "bare": re.compile(r"^Container created$"),
}


def _collect(stream: object) -> tuple[list[bytes], dict[str, PodTruth]]:
    lines: list[bytes] = []
    truths: dict[str, PodTruth] = {}
    for line, truth in stream:  # type: ignore[attr-defined]
        lines.append(line)
        truths[truth.uid] = truth
    return lines, truths


def _disagreements(lines: list[bytes], truths: dict[str, PodTruth]) -> list[str]:
    tracker = timelines_from(lines)
    assert {t.uid for t in tracker} == set(truths), "the core tracks other pods than were sent"
    return [msg for t in tracker if (msg := _compare(t, truths[t.uid]))]


def _compare(t: PodTimeline, truth: PodTruth) -> str:
    got = {
        "state": t.state(),
        "node": t.node,
        "model": t.model,
        "tp_size": t.tp_size,
        "gpu_util": t.gpu_util,
        "total": t.total(),
        **t.phases(),
    }
    want = {
        "state": truth.state,
        "node": truth.node,
        "model": truth.model,
        "tp_size": truth.tp_size,
        "gpu_util": truth.gpu_util,
        "total": truth.total,
        **truth.phases,
    }
    wrong = [k for k in want if not _same(got[k], want[k])]
    return (
        f"{truth.name}: " + ", ".join(f"{k} {got[k]!r} != {want[k]!r}" for k in wrong)
        if wrong
        else ""
    )


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) < 1e-6
    return a == b


def _messages(lines: list[bytes], reason: str) -> list[str]:
    out = []
    for line in lines:
        obj = orjson.loads(line)["object"]
        if obj.get("kind") == "Event" and obj.get("reason") == reason:
            out.append(obj.get("message") or obj.get("note"))
    return out


def test_truth_agrees_with_the_core_for_every_pod_of_a_mixed_stream() -> None:
    lines, truths = _collect(watch_stream(400, seed=11))
    assert len(truths) == 400
    assert _disagreements(lines, truths) == []
    states = Counter(t.state for t in truths.values())
    assert set(states) == {"ready", "engine_init", "scheduling"}


@pytest.mark.parametrize("events_api", ["core", "new"])
@pytest.mark.parametrize("form", PULL_FORMS)
def test_every_pulled_form_agrees_in_both_event_apis(form: str, events_api: str) -> None:
    lines, truths = _collect(watch_stream(40, seed=3, pull_form=form, events_api=events_api))
    pulled = _messages(lines, "Pulled")
    assert pulled and all(_PULLED[form].search(m) for m in pulled), pulled[:3]
    assert _disagreements(lines, truths) == []
    api = "events.k8s.io/v1" if events_api == "new" else "v1"
    kinds = {(o["kind"], o["apiVersion"]) for o in (orjson.loads(x)["object"] for x in lines)}
    assert ("Event", api) in kinds


def test_pulls_without_a_pulling_event_take_the_reported_figure() -> None:
    lines, truths = _collect(watch_stream(200, seed=5, pull_form="waiting", scenario="cold"))
    pulling = {orjson.loads(x)["object"]["regarding" if b"regarding" in x else "involvedObject"]
               ["uid"] for x in lines if b'"reason":"Pulling"' in x}  # fmt: skip
    unseen = [t for t in truths.values() if t.uid not in pulling]
    assert unseen, "the stream should drop some Pulling events"
    # The reported figure has milliseconds; one measured between events would not.
    assert any((t.phases["image_pull"] or 0) % 1 for t in unseen)
    assert _disagreements(lines, truths) == []


@pytest.mark.parametrize("form", CREATED_FORMS)
def test_every_created_form_agrees(form: str) -> None:
    lines, truths = _collect(watch_stream(30, seed=4, created_form=form, scenario="cold"))
    created = _messages(lines, "Created")
    assert created and all(_CREATED[form].search(m) for m in created)
    started = _messages(lines, "Started")
    assert all(
        m.startswith("Started container" + (":" if form == "colon" else " ")) for m in started
    )
    assert _disagreements(lines, truths) == []


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_agrees(scenario: str) -> None:
    lines, truths = _collect(watch_stream(30, seed=6, scenario=scenario))
    assert _disagreements(lines, truths) == []
    want = {"unschedulable": "scheduling", "stuck": "engine_init"}.get(scenario, "ready")
    assert {t.state for t in truths.values()} == {want}


def test_unschedulable_pods_say_why_and_repeat_their_event() -> None:
    lines, truths = _collect(watch_stream(20, seed=8, scenario="unschedulable"))
    tracker = timelines_from(lines)
    assert all("8 Insufficient nvidia.com/gpu" in (t.unschedulable or "") for t in tracker)
    bumps = [orjson.loads(x) for x in lines if b"FailedScheduling" in x and b"MODIFIED" in x]
    assert bumps, "no count/series bump was sent"
    for ev in bumps:
        obj = ev["object"]
        count = (obj.get("series") or {}).get("count") or obj.get("count")
        assert count > 1


def test_duplicated_pod_events_change_nothing() -> None:
    lines, truths = _collect(watch_stream(150, seed=9, duplicates=0.3))
    plain, _ = _collect(watch_stream(150, seed=9))
    assert len(lines) > len(plain)
    assert _disagreements(lines, truths) == []


def test_lines_are_valid_watch_events_of_valid_objects() -> None:
    lines, _ = _collect(watch_stream(60, seed=2))
    shapes = set()
    for line in lines:
        event = json.loads(line)  # the standard library agrees with orjson
        assert event == orjson.loads(line)
        assert event["type"] in ("ADDED", "MODIFIED")
        obj = event["object"]
        shape = (obj["kind"], obj["apiVersion"], obj.get("reason"), event["type"])
        if shape not in shapes:
            shapes.add(shape)
            kubernetes_validate.validate(obj, "1.31", strict=True)
    assert len(shapes) >= 12


def test_pods_are_realistic_in_size_and_content() -> None:
    lines, _ = _collect(watch_stream(50, seed=2))
    objects = (orjson.loads(x)["object"] for x in lines)
    pods = [o for o in objects if o["kind"] == "Pod"]
    sizes = [len(orjson.dumps(p)) for p in pods]
    assert 4_000 < mean(sizes) < 8_000
    pod = pods[-1]
    assert pod["metadata"]["labels"]["app"] == "vllm-inference"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert pod["metadata"]["managedFields"]
    main = pod["spec"]["containers"][0]
    assert main["image"].startswith("vllm/vllm-openai:v0.6.")
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "--tensor-parallel-size" in main["args"]


def test_durations_follow_the_issue_figures() -> None:
    _, truths = _collect(watch_stream(600, seed=1))
    cold = [t.phases for t in truths.values() if (t.phases["image_pull"] or 0) > 30]
    ready = [t.phases for t in truths.values() if t.state == "ready"]
    assert 160 < mean(p["image_pull"] or 0 for p in cold) < 215
    assert 80 < mean(p["container_start"] or 0 for p in ready) < 110
    assert 210 < mean(p["engine_init"] or 0 for p in ready) < 260
    warm = [t for t in truths.values() if t.phases["image_pull"] == 0.0]
    assert len(warm) > 50


def test_same_seed_same_bytes_other_seed_other_bytes() -> None:
    first = [line for line, _ in watch_stream(80, seed=42)]
    again = [line for line, _ in watch_stream(80, seed=42)]
    other = [line for line, _ in watch_stream(80, seed=43)]
    assert first == again
    assert first != other
    assert list(tracked_pods(30, seed=1)) == list(tracked_pods(30, seed=1))


def test_pod_names_are_unique_within_a_stream() -> None:
    _, truths = _collect(watch_stream(2_000, seed=12))
    assert len({(t.namespace, t.name) for t in truths.values()}) == 2_000


def test_tracked_pods_leave_every_pod_tracked() -> None:
    tracker = timelines_from(tracked_pods(300, seed=3))
    assert len(tracker) == 300
    assert {t.state() for t in tracker} == {"ready", "engine_init"}


def test_workload_helpers_decode_to_what_they_say() -> None:
    (dep,) = decode(deployment_event(image="vllm/vllm-openai:v0.6.6", generation=3, ready=2))
    assert isinstance(dep, WorkloadSeen)
    assert (dep.kind, dep.generation, dep.ready_replicas, dep.replicas) == ("Deployment", 3, 2, 4)
    assert dep.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert dep.images == ("vllm/vllm-openai:v0.6.6",)
    (ds,) = decode(daemonset_event(image="vllm/vllm-openai:v0.6.6", nodes=8, ready=5))
    assert isinstance(ds, WorkloadSeen)
    assert (ds.kind, ds.replicas, ds.ready_replicas) == ("DaemonSet", 8, 5)
    assert "vllm/vllm-openai:v0.6.6" in ds.images
    for line in (deployment_event(), daemonset_event()):
        kubernetes_validate.validate(orjson.loads(line)["object"], "1.31", strict=True)
