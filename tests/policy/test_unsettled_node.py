"""A pod hung on a node whose GPU memory a verification found unsettled is the node's.

Its deletion says so (`Decision.unsettled_node`, and the reason), and blast_radius neither caps
nor counts it: the pod serves nothing, and its replacement, which lands on the same node (its
GPUs are the freest, its image is there), waited behind every other deletion of the workload
(docs/simulation.md: with four such nodes and cordoning off, fleets' P99 time to Ready was
above the seed rule's, and equal to it without the cap). A verification that finds the node
settled ends it. Default policy: no history, so engine init's budget is the whole expected
cold start (600 s), and blast_radius allows one deletion per workload of unknown size.
"""

from __future__ import annotations

from typing import Any

from remediator.contract.decision import Decision
from tests.policy.builders import T0, pod, ts
from tests.policy.conftest import Run, make_run

BAD = "gpu-node-3"
PODS = [("vllm-70b-7c9d5b6f4-hung1", "aaaaaaaa-0000-0000-0000-000000000001"),
        ("vllm-70b-7c9d5b6f4-hung2", "aaaaaaaa-0000-0000-0000-000000000002")]  # fmt: skip


def verdict(stable: bool, at: float, node: str = BAD) -> dict[str, Any]:
    detail = "" if stable else "GPU 3 spread 8192 MiB > 512 MiB"
    return {"kind": "GpuMemoryVerdict", "node": node, "stable": stable, "detail": detail,
            "time": ts(at)}  # fmt: skip


def _hung(run: Run, node: str = BAD) -> None:
    for name, uid in PODS:
        run.feed(pod(name, uid, created=0, scheduled=1, started=10, node=node))


def _deleted(run: Run) -> list[Decision]:
    return [d for d in run.decisions if d.action == "delete-pod"]


def test_both_pods_on_a_node_verified_unsettled_go_and_say_why() -> None:
    run = make_run("")
    _hung(run)
    run.feed(verdict(False, 100))
    run.at(T0 + 900)
    deleted = _deleted(run)
    assert [d.target for d in deleted] == [name for name, _ in PODS]
    assert all(d.unsettled_node == BAD for d in deleted)
    assert all(f"(on {BAD}, whose GPU memory a verification found unsettled)" in d.reason
               for d in deleted)  # fmt: skip
    assert not [h for h in run.held if h.guardrail == "blast_radius"]


def test_each_deletion_is_told_in_the_thread_of_the_nodes_own_message() -> None:
    """On-call reads one line for the node in the channel, and each pod that hung there in
    its thread, rather than a line per deletion for as long as it is not cordoned."""
    run = make_run("")
    _hung(run)
    run.feed(verdict(False, 100))
    run.at(T0 + 900)
    (told,) = [d for d in run.decisions if d.action == "notify" and d.target == BAD]
    assert told.told_under is None
    assert [d.told_under for d in _deleted(run)] == [told.incident, told.incident]


def test_the_nodes_incident_is_the_verdicts_time_not_the_clock_that_heard_it() -> None:
    """On Kafka every partition hears the verdict, each on its own clock: each must name
    the same incident, the one whose message the owner partition tells."""
    incidents = set()
    for heard in (100, 160):
        run = make_run("")
        _hung(run)
        run.at(T0 + heard)
        run.feed(verdict(False, 100))
        run.at(T0 + 900)
        incidents |= {d.told_under for d in _deleted(run)}
    assert len(incidents) == 1 and None not in incidents


def test_without_the_verdict_the_second_waits_for_blast_radius() -> None:
    run = make_run("")
    _hung(run)
    run.at(T0 + 900)
    (deleted,) = _deleted(run)
    assert deleted.unsettled_node is None and deleted.told_under is None
    assert any(h.guardrail == "blast_radius" for h in run.held)


def test_a_pod_on_another_node_is_capped_as_before() -> None:
    run = make_run("")
    _hung(run, node="gpu-node-4")
    run.feed(verdict(False, 100))
    run.at(T0 + 900)
    assert len(_deleted(run)) == 1


def test_a_verification_that_finds_the_node_settled_ends_it() -> None:
    run = make_run("")
    _hung(run)
    run.feed(verdict(False, 100))
    run.feed(verdict(True, 200))
    run.at(T0 + 900)
    assert [d.unsettled_node for d in _deleted(run)] == [None]


def test_the_node_found_settled_is_told_in_its_thread_once() -> None:
    """On-call who read "did not settle" reads its end under it; a node never found unsettled
    says nothing when found settled (a warmup verifies every node)."""
    run = make_run("")
    run.feed(verdict(True, 50, node="gpu-node-4"))
    run.feed(verdict(False, 100))
    run.feed(verdict(True, 200))
    run.feed(verdict(True, 300))
    told = [d for d in run.decisions if d.action == "notify"]
    assert [d.target for d in told] == [BAD, BAD]
    unsettled, settled = told
    assert settled.told_under == unsettled.incident and settled.incident != unsettled.incident
    assert f"GPU memory on {BAD} settled" in settled.reason
