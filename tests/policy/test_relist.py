"""A relist reconciles: a pod the new list no longer holds was deleted while the watch was
away; it leaves the tracker as deleted and its timers stand down (issue 10, #7)."""

from __future__ import annotations

from typing import Any

from remediator.inputs.records import Relisted
from tests.policy.builders import T0, deployment, event, pod, ts
from tests.policy.conftest import Run

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "99999999-2222-3333-4444-555555555555"


def relisted(
    *uids: str,
    kind: str = "Pod",
    ns: str = "llm",
    version: int = 0,
    selector: str | None = None,
    at: float | None = 30.0,
) -> Relisted:
    when = T0 + at if at is not None else None
    return Relisted(kind, ns, frozenset(uids), version, selector, when)


def stuck(version: int | None = None, **kw: Any) -> dict[str, Any]:
    doc = pod(created=0, scheduled=1, started=10, **kw)
    if version is not None:
        doc["object"]["metadata"]["resourceVersion"] = str(version)
    return doc


def relist(run: Run, item: Relisted) -> Run:
    run.session.feed(item, run)
    return run


def test_a_pod_missing_from_the_relist_is_deleted_and_never_acted_on(run: Run) -> None:
    relist(run.feed(stuck()), relisted())
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "deleted" and t.deleted_at == T0 + 30
    assert run.session.tracker.in_state == {("llm", "deleted"): 1}
    run.at(T0 + 3600)
    assert run.decisions == [] and run.held == []


def test_without_a_server_time_the_deletion_is_known_at_the_current_time(run: Run) -> None:
    run.feed(stuck()).at(T0 + 40)
    relist(run, relisted(at=None))
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.deleted_at == T0 + 40


def test_the_events_relist_after_it_does_not_bring_the_pod_back(run: Run) -> None:
    relist(run.feed(stuck()), relisted())
    run.feed(event("Started", "Started container vllm", 10))  # the Events list replays
    relist(run, relisted(kind="Event"))
    run.at(T0 + 3600)
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "deleted"
    assert run.decisions == []


def test_a_pod_the_relist_still_holds_is_acted_on(run: Run) -> None:
    relist(run.feed(stuck()), relisted(UID_A))
    run.at(T0 + 3600)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]


def test_a_relist_covers_only_its_namespace_and_selector(run: Run) -> None:
    run.feed(stuck())
    relist(run, relisted(ns="other"))
    relist(run, relisted(selector="metadata.name=someone-else"))
    relist(run, relisted(selector="status.phase=Running"))  # not evaluable: reconciles nothing
    run.at(T0 + 3600)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]


def test_a_relist_with_its_name_selector_reconciles_that_pod(run: Run) -> None:
    relist(run.feed(stuck()), relisted(selector="metadata.name=vllm-70b-7c9d5b6f4-abcde"))
    run.at(T0 + 3600)
    assert run.decisions == []


def test_a_pod_seen_newer_than_the_list_is_kept(run: Run) -> None:
    # A webhook told of the pod after the list's snapshot was taken: the list cannot know it.
    relist(run.feed(stuck(version=120)), relisted(version=100))
    run.at(T0 + 3600)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]


def test_only_the_missing_pod_goes(run: Run) -> None:
    run.feed(stuck(), stuck(name="vllm-70b-7c9d5b6f4-fghij", uid=UID_B))
    relist(run, relisted(UID_B))
    run.at(T0 + 3600)
    assert [d.uid for d in run.decisions] == [UID_B]


def test_a_workload_missing_from_its_relist_is_forgotten(run: Run) -> None:
    run.feed(deployment("vllm/vllm-openai:v0.6.3"))
    assert "llm/Deployment/vllm-70b" in run.session.engine.workloads
    relist(run, relisted("another-uid", kind="StatefulSet"))
    assert "llm/Deployment/vllm-70b" in run.session.engine.workloads
    relist(run, relisted("another-uid", kind="Deployment"))
    assert run.session.engine.workloads == {}


def test_no_timer_of_a_pod_gone_fires_on_the_way_to_the_lists_time(run: Run) -> None:
    # Its budget lapses at T0 + 90; the list, taken at T0 + 120, no longer holds it.
    relist(run.feed(stuck()), relisted(at=120))
    assert run.decisions == [] and run.session.now == T0 + 120


# Events outlive their pods by an hour: a new serve's Event list holds those of pods deleted
# long ago. A pod the namespace's complete Pod list did not hold is not one to track.
def made(doc: dict[str, Any], at: float) -> dict[str, Any]:
    doc["object"]["metadata"]["creationTimestamp"] = ts(at)
    return doc


def old_started(at: float = 10) -> dict[str, Any]:
    return made(event("Started", "Started container vllm", at), at)


def test_events_of_a_pod_the_list_did_not_hold_are_of_a_pod_gone(run: Run) -> None:
    run.feed(old_started())  # the Events list came first
    relist(run, relisted())
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "deleted"
    run.at(T0 + 3600)
    assert run.decisions == [] and run.session.tracker.in_state == {("llm", "deleted"): 1}


def test_events_made_before_the_list_after_it_are_of_a_pod_gone(run: Run) -> None:
    relist(run, relisted(UID_B))  # the Pod list came first
    run.feed(old_started())
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "deleted"
    run.at(T0 + 3600)
    assert run.decisions == []


def test_events_made_after_the_list_are_of_a_new_pod(run: Run) -> None:
    relist(run, relisted(UID_B, at=5))
    run.feed(old_started(at=10))
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "engine_init"


def test_a_pod_made_after_the_list_comes_back_when_it_is_seen(run: Run) -> None:
    run.feed(old_started(at=10))
    relist(run, relisted(at=8))  # its list went out before the pod was made
    assert run.session.tracker.in_state == {("llm", "deleted"): 1}
    run.feed(stuck())
    t = run.session.tracker.get(UID_A)
    assert t is not None and t.state() == "engine_init"
    run.at(T0 + 3600)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]
