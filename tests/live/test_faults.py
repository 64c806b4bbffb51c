"""Faults a real control plane produces and a stand-in only imitates: a watch resumed past
etcd compaction (410 Gone), the API server restarted mid-watch, and the real Lease's expiry
when a leader dies by SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from collections.abc import Callable
from typing import Any

from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import run_workflow, workflows_of
from tests.standins.argo_server import ArgoStandin

DELETE = "delete-stuck-inference-pod"


def compact_etcd(cluster: LiveCluster) -> int:
    """Compact etcd at its current revision through its gRPC gateway (what kube-apiserver
    does every 5 minutes); older revisions are gone and a watch from them gets 410."""
    url = cluster.raw.etcd_url
    req = urllib.request.Request(f"{url}/v3/kv/range", data=b'{"key": "AA=="}', method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        rev = int(json.loads(r.read())["header"]["revision"])
    body = json.dumps({"revision": rev, "physical": True}).encode()
    req = urllib.request.Request(f"{url}/v3/kv/compaction", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    return rev


def relists(s: Serve) -> int:
    """How often serve's watches said they relist because events may have been missed."""
    return sum(1 for x in s.log_lines() if x.get("msg") == "watch behind: relisting")


def pods_uids(cluster: LiveCluster, sel: str) -> set[str]:
    return {p["metadata"]["uid"] for p in cluster.pods(NS, sel)}


def test_a_watch_resumed_past_compaction_relists_and_misses_nothing(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    s = serve()
    healthy = "app.kubernetes.io/name=vllm-before-gap"
    workloads(example_deployment("vllm-before-gap", 2, shape={"pull": "1s", "engine": "1s"}))
    wait_for(lambda: s.sample("remediator_cold_start_phase_seconds_count", phase="engine_init")
             >= 2, 60, "serve saw the healthy pods start")  # fmt: skip
    assert s.proc is not None
    relisted = relists(s)
    os.kill(s.proc.pid, signal.SIGSTOP)  # serve misses everything from here
    try:
        gap = "app.kubernetes.io/name=vllm-in-gap"
        shape = {"pull": "1s", "engine": "1s", "hang": "engine"}
        workloads(example_deployment("vllm-in-gap", 1, shape=shape))
        wait_for(
            lambda: any(
                c.get("state", {}).get("running")
                for p in cluster.pods(NS, gap)
                for c in p.get("status", {}).get("containerStatuses", [])
            ),
            60,
            "the gap's pod in engine init",
        )
        # A new watch cache starts at the current revision, and etcd forgot the older ones.
        cluster.raw.restart("kube-apiserver")
        compact_etcd(cluster)
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    # Resumed, the watch gets 410 and relists; or its probe finds the stream cut first (the
    # API server restarted) and it relists without resuming: either way, a relist.
    wait_for(lambda: relists(s) > relisted, 60, "a relist (410, or the stream found cut)")
    wf = wait_for(lambda: workflows_of(argo, DELETE), 60, "the hung pod seen after the relist")
    assert [w for w in wf if w["spec"]["arguments"]]
    (uid,) = pods_uids(cluster, gap)
    targets = [
        p["value"] for w in wf for p in w["spec"]["arguments"]["parameters"] if p["name"] == "uid"
    ]
    assert targets == [uid], "exactly one delete, for the pod the gap hid"
    assert not pods_uids(cluster, healthy) & set(targets)
    assert s.healthy()


def test_two_replicas_on_the_real_lease_a_killed_leader_is_replaced_one_delete_in_all(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/remediator/leases/remediator-leader"

    def holder() -> str:
        lease = cluster.get(lease_path) or {}
        return str(lease.get("spec", {}).get("holderIdentity") or "")

    a = serve("remediator-a")
    wait_for(lambda: holder() == "remediator-a", 30, "a leads")
    b = serve("remediator-b")
    transitions = int((cluster.get(lease_path) or {})["spec"].get("leaseTransitions", 0))
    sel = "app.kubernetes.io/name=vllm-lease"
    workloads(example_deployment("vllm-lease", 1, shape={"pull": "1s", "hang": "engine"}))
    wait_for(lambda: pods_uids(cluster, sel), 30, "the pod")
    a.kill()  # SIGKILL: no release; b must wait for the Lease to expire
    assert holder() == "remediator-a"
    wait_for(lambda: holder() == "remediator-b", 90, "b takes over after expiry")
    wf = wait_for(lambda: workflows_of(argo, DELETE), 90, "the delete")
    run_workflow(cluster, wf[0])
    wait_for(lambda: b.sample("remediator_leader") == 1.0, 10, "b reports it leads")
    lease = cluster.get(lease_path)
    assert lease is not None
    assert int(lease["spec"]["leaseTransitions"]) > transitions
    assert len(workflows_of(argo, DELETE)) == 1, "exactly one delete in all"
    assert len([r for r in argo.submitted() if r.body["resourceName"] == DELETE]) == 1
