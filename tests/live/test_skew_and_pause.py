"""Skew and pause (issue 18, done-criterion), on the real control plane: one node's kubelet
clock an hour ahead and another's an hour behind, serve paused (SIGSTOP) while pods became
Ready, and a watch outage (the TCP relay between serve and the API server paused) while pods
became Ready. No healthy pod is deleted, and every hung pod is still found.

Every delete workflow serve submits is run, step and all, against the real API server (the
step looks again too); a pod counts as killed when its UID is gone. The pause and the outage
are PAUSE_S and OUTAGE_S long (environment REMEDIATOR_LIVE_PAUSE_S, _OUTAGE_S; the issue's
90 s and 40 s are what the closing note reports): each only has to outlast the 10 s
engine-init budget for a timer to fire in it."""

from __future__ import annotations

import copy
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.live.faults import Relay, SkewedKwok
from tests.live.harness import (
    NS,
    POLICY,
    LiveCluster,
    Serve,
    example_deployment,
    free_port,
    wait_for,
)
from tests.live.test_incidents import params, ready, run_workflow, workflows_of
from tests.standins.argo_server import ArgoStandin

DELETE = "delete-stuck-inference-pod"
PAUSE_S = float(os.environ.get("REMEDIATOR_LIVE_PAUSE_S", "30"))
OUTAGE_S = float(os.environ.get("REMEDIATOR_LIVE_OUTAGE_S", "20"))
HEALTHY = {"pull": "1s", "init": "1s", "start": "1s", "engine": "7s"}  # Ready within 10 s
HUNG = {"pull": "1s", "init": "1s", "start": "1s", "hang": "engine"}
# Guardrails wide enough that every hung pod here is acted on (each is its own workload).
SKEW_POLICY = (
    POLICY.split("guardrails:")[0]
    + """guardrails:
  cooldown: {seconds: 0}
  blast_radius: {max_pods: 50, max_percent: 100, window_s: 600, max_pods_cluster: 50}
  rate_limit: {per_minute: 600, burst: 100}
"""
)


def node(cluster: LiveCluster, name: str, label: str) -> None:
    doc = copy.deepcopy(cluster.raw.api("GET", "/api/v1/nodes/gpu-node-000"))
    meta = {k: doc["metadata"][k] for k in ("labels", "annotations")}
    meta["labels"] = {**meta["labels"], "type": label, "kubernetes.io/hostname": name}
    cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, **meta},
                "spec": {"podCIDR": f"10.{200 + len(label)}.0.0/24"},
                "status": {k: doc["status"][k] for k in ("capacity", "allocatable")},
            }
        ]
    )


def on(doc: dict[str, Any], node_type: str) -> dict[str, Any]:
    """The example Deployment (init container and all), its pods placed by node type."""
    spec = doc["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"type": node_type}
    spec.setdefault("tolerations", []).append({"operator": "Exists"})
    return doc


@pytest.fixture
def skewed(cluster: LiveCluster) -> Iterator[None]:
    procs = []
    for label, shift in (("kwok-ahead", "+1h"), ("kwok-behind", "-1h")):
        node(cluster, f"gpu-{label}", label)
        procs.append(SkewedKwok(cluster.raw, label, shift, free_port()).start())
    try:
        yield
    finally:
        for p in procs:
            p.stop()
        for label in ("kwok-ahead", "kwok-behind"):
            cluster.delete(f"/api/v1/nodes/gpu-{label}")


@pytest.fixture
def relayed(cluster: LiveCluster, tmp_path: Path) -> Iterator[tuple[Relay, Path]]:
    relay = Relay(int(cluster.raw.state["ports"]["apiserver"]))
    sa = yaml.safe_load(cluster.sa_kubeconfig("remediator", "remediator").read_text())
    for c in sa["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path = tmp_path / "relayed.kubeconfig"
    path.write_text(yaml.safe_dump(sa))
    try:
        yield relay, path
    finally:
        relay.close()


def uids(cluster: LiveCluster, name: str) -> set[str]:
    sel = f"app.kubernetes.io/name={name}"
    return {p["metadata"]["uid"] for p in cluster.pods(NS, sel)}


def all_ready(cluster: LiveCluster, name: str, n: int) -> set[str] | None:
    pods = cluster.pods(NS, f"app.kubernetes.io/name={name}")
    return (
        {p["metadata"]["uid"] for p in pods} if len(pods) == n and all(map(ready, pods)) else None
    )


def in_engine_init(s: Serve, n: int) -> bool:
    return s.sample("remediator_pods_in_phase", namespace=NS, phase="engine_init") >= n


def test_skew_pause_and_watch_gap_kill_no_healthy_pod_and_find_every_hung_one(
    cluster: LiveCluster,
    skewed: None,  # before `workloads`: its kwoks outlive the pods they play
    relayed: tuple[Relay, Path],
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    relay, kubeconfig = relayed
    s = serve(policy=SKEW_POLICY, kubeconfig=kubeconfig)
    healthy: set[str] = set()
    hung: dict[str, str] = {}  # workload -> its hung pod's uid

    def make(name: str, n: int, shape: dict[str, str], where: str = "kwok") -> None:
        workloads(on(example_deployment(name, n, shape=shape, gpus=1), where))

    # 1. Clocks: three healthy pods and one hung on each skewed node, and on a good one.
    for where in ("kwok-ahead", "kwok-behind", "kwok"):
        make(f"ok-{where}", 3, HEALTHY, where)
        make(f"hung-{where}", 1, HUNG, where)
    for where in ("kwok-ahead", "kwok-behind", "kwok"):
        healthy |= wait_for(lambda w=where: all_ready(cluster, f"ok-{w}", 3), 90, f"ok-{where}")
        hung[f"hung-{where}"] = next(iter(wait_for(lambda w=where: uids(cluster, f"hung-{w}"))))

    # 2. A pause: serve stopped while five pods finish their engine init (and one hangs).
    make("pause", 5, HEALTHY)
    make("hung-pause", 1, HUNG)
    wait_for(lambda: in_engine_init(s, 3 + 6), 60, "the pause's pods in engine init")
    assert s.proc is not None
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        healthy |= wait_for(lambda: all_ready(cluster, "pause", 5), 60, "Ready while paused")
        time.sleep(max(PAUSE_S - 10, 0))
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    hung["hung-pause"] = next(iter(uids(cluster, "hung-pause")))

    # 3. A watch gap: the API server out of serve's reach while five pods get Ready.
    make("gap", 5, HEALTHY)
    make("hung-gap", 1, HUNG)
    wait_for(lambda: in_engine_init(s, 4 + 6), 60, "the gap's pods in engine init")
    relay.pause()
    try:
        healthy |= wait_for(lambda: all_ready(cluster, "gap", 5), 60, "Ready during the gap")
        time.sleep(max(OUTAGE_S - 10, 0))
    finally:
        relay.resume()
    hung["hung-gap"] = next(iter(uids(cluster, "hung-gap")))

    # Every hung pod is found: a delete workflow for each; run them all, as Argo would.
    def found() -> set[str] | None:
        targets = {params(w)["uid"] for w in workflows_of(argo, DELETE)}
        return targets if set(hung.values()) <= targets else None

    wait_for(found, 120, "a delete for every hung pod")
    time.sleep(5)  # let anything else serve would submit arrive
    submitted = workflows_of(argo, DELETE)
    for wf in submitted:
        run_workflow(cluster, wf)
    alive = {
        p["metadata"]["uid"] for p in cluster.pods(NS) if not p["metadata"].get("deletionTimestamp")
    }
    killed = healthy - alive
    targets = {params(w)["uid"] for w in submitted}
    counts = {
        "healthy": len(healthy),
        "healthy_killed": len(killed),
        "healthy_targeted": len(healthy & targets),
        "hung": len(hung),
        "hung_found": len(set(hung.values()) & targets),
        "hung_deleted": len(set(hung.values()) - alive),
        # How serve kept them alive: held after the pause, spared on a look again.
        "serve_behind": sum(1 for x in s.log_lines() if str(x.get("msg")).startswith("behind")),
        "serve_spared": sum(1 for x in s.log_lines() if str(x.get("msg")).startswith("spared")),
        "pause_s": PAUSE_S,
        "outage_s": OUTAGE_S,
        "skew": ["+1h", "-1h"],
    }
    (tmp_path / "counts.json").write_text(json.dumps(counts))
    print("skew-and-pause counts:", json.dumps(counts))
    assert killed == set() and not healthy & targets, counts
    assert counts["hung_found"] == len(hung) == counts["hung_deleted"], counts
    skew = {
        (ls["node"]): v
        for (n, ls_t), v in s.metrics().items()
        if n == "remediator_node_clock_skew_seconds"
        for ls in [dict(ls_t)]
    }
    assert skew.get("gpu-kwok-ahead", 0) > 3000 and skew.get("gpu-kwok-behind", 0) < -3000, skew
