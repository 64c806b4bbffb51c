"""The seed's incidents, played for real on the control plane: the real scheduler, ReplicaSet and
DaemonSet controllers, kwok playing each pod's cold start, serve watching as its ServiceAccount,
and each workflow's step run as the workflow ServiceAccount against the real API server."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.live.harness import (
    NS,
    POLICY,
    WARMUP,
    LiveCluster,
    Recorder,
    Serve,
    example_deployment,
    replay,
    run_step,
    step_commands,
    wait_for,
)
from tests.standins.argo_server import ArgoStandin
from tests.standins.slack_server import SlackStandin

HANG = "cold-start.remediator.dev/hang"


def workflows_of(argo: ArgoStandin, template: str) -> list[dict[str, Any]]:
    return [
        w
        for w in list(argo.workflows.values())
        if w["spec"]["workflowTemplateRef"]["name"] == template
    ]


def params(wf: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}


def ready(pod: dict[str, Any]) -> bool:
    conds = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def run_workflow(cluster: LiveCluster, wf: dict[str, Any]) -> list[str]:
    outputs = []
    for argv, env in step_commands(wf):
        done = run_step(cluster, argv, env)
        assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stderr}"
        outputs.append(done.stdout)
    return outputs


def test_only_the_pod_hung_in_engine_init_is_deleted_and_its_replacement_comes_up(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    with Recorder(cluster, tmp_path / "hung-engine-init.jsonl") as rec:
        live = hung_pod_incident(cluster, serve, argo, workloads)
    # The recorded stream, replayed by the core with the same policy, decides what serve did.
    lines = replay(rec.path, POLICY, tmp_path)
    decided = [(d["action"], d["uid"]) for d in lines if d["kind"] == "decision"]
    assert decided == [("delete-pod", live["uid"])]
    record_dir = os.environ.get("REMEDIATOR_RECORD_DIR")
    if record_dir:  # how tests/data/cluster/ was made: REMEDIATOR_RECORD_DIR=tests/data/cluster
        shutil.copy(rec.path, Path(record_dir) / rec.path.name)
        expected = {"policy": POLICY, "decisions": [{"action": a, "uid": u} for a, u in decided]}
        (Path(record_dir) / "hung-engine-init.expected.json").write_text(
            json.dumps(expected, indent=2) + "\n"
        )


def hung_pod_incident(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> dict[str, str]:
    """Three pods of one model; one hangs in engine init (its annotation set right after it is
    created, before kwok plays its start). Returns the hung pod's name and UID."""
    sel = "app.kubernetes.io/name=vllm-hang"
    s = serve()
    workloads(example_deployment("vllm-hang", replicas=3, shape={"pull": "1s", "engine": "3s"}))
    pods = wait_for(lambda: len(cluster.pods(NS, sel)) == 3 and cluster.pods(NS, sel), 30, "pods")
    hung = min(pods, key=lambda p: p["metadata"]["name"])
    name, uid = hung["metadata"]["name"], hung["metadata"]["uid"]
    patch = {"metadata": {"annotations": {HANG: "engine"}}}
    cluster.api(
        "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}", patch,
        ctype="application/strategic-merge-patch+json",
    )  # fmt: skip
    siblings = {p["metadata"]["uid"] for p in pods} - {uid}
    wait_for(
        lambda: sum(ready(p) for p in cluster.pods(NS, sel)) == 2, 60, "the two siblings Ready"
    )
    wf = wait_for(lambda: workflows_of(argo, "delete-stuck-inference-pod"), 60, "a delete")[0]
    assert params(wf)["pod"] == name and params(wf)["uid"] == uid
    run_workflow(cluster, wf)
    wait_for(lambda: uid not in {p["metadata"]["uid"] for p in cluster.pods(NS, sel)}, 30, "gone")
    now = wait_for(
        lambda: (ps := cluster.pods(NS, sel)) and len(ps) == 3 and all(map(ready, ps)) and ps,
        60,
        "three Ready pods again",
    )
    assert siblings < {p["metadata"]["uid"] for p in now}, "a healthy sibling was replaced"
    assert len(workflows_of(argo, "delete-stuck-inference-pod")) == 1
    assert s.healthy()
    return {"pod": name, "uid": uid}


def test_a_replayed_delete_of_a_replaced_pod_is_refused_by_its_uid(cluster: LiveCluster) -> None:
    """The UID precondition, for real: a pod recreated under the same name is never deleted by
    an action meant for its predecessor."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        # a vLLM pod that never becomes Ready: the step spares a Ready pod (it looks again)
        "metadata": {
            "name": "uid-guard",
            "namespace": NS,
            "labels": {"app": "vllm-inference"},
            "annotations": {"cold-start.remediator.dev/hang": "engine"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "gpu-node-000"},
    }
    first = cluster.api("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    cluster.api("DELETE", f"/api/v1/namespaces/{NS}/pods/uid-guard?gracePeriodSeconds=0")
    wait_for(lambda: cluster.get(f"/api/v1/namespaces/{NS}/pods/uid-guard") is None, 30, "gone")
    second = cluster.api("POST", f"/api/v1/namespaces/{NS}/pods", pod)
    argv = ["step", "delete-pod", "--namespace", NS, "--pod", "uid-guard"]
    stale = run_step(cluster, [*argv, "--uid", first["metadata"]["uid"]], {})
    # the step reads the pod again first and finds another instance under the name: spared
    # (a replacement that appears after that read meets the API server's UID precondition)
    assert stale.returncode == 0, stale.stderr
    assert '"outcome": "replaced"' in stale.stdout, stale.stdout
    still = cluster.get(f"/api/v1/namespaces/{NS}/pods/uid-guard")
    assert still is not None and still["metadata"]["uid"] == second["metadata"]["uid"]
    right = run_step(cluster, [*argv, "--uid", second["metadata"]["uid"]], {})
    assert right.returncode == 0, right.stderr
    wait_for(lambda: cluster.get(f"/api/v1/namespaces/{NS}/pods/uid-guard") is None, 30, "gone")


def test_a_pod_that_cannot_get_gpus_is_told_never_deleted(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    slack: SlackStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    sel = "app.kubernetes.io/name=vllm-huge"
    serve()
    workloads(example_deployment("vllm-huge", replicas=1, gpus=16))
    event = wait_for(
        lambda: [
            e
            for e in cluster.events(NS)
            if e["reason"] == "FailedScheduling"
            and e["involvedObject"]["name"].startswith("vllm-huge")
        ],
        60,
        "the real scheduler's FailedScheduling",
    )[0]
    assert "Insufficient nvidia.com/gpu" in event["message"]
    told = wait_for(
        lambda: [p for p in slack.posted() if "nvidia.com/gpu" in str(p.body)], 60, "told"
    )
    assert told
    assert not workflows_of(argo, "delete-stuck-inference-pod")
    assert len(cluster.pods(NS, sel)) == 1


def test_a_new_model_image_restarts_the_warmup_daemonset_and_its_rollout_completes(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    ns, ds = WARMUP
    path = f"/apis/apps/v1/namespaces/{ns}/daemonsets/{ds}"
    wait_for(lambda: (d := cluster.get(path)) and d["status"].get("numberReady") == 4, 60, "DS")
    workloads(example_deployment("vllm-roll", replicas=1, shape={"pull": "1s", "engine": "1s"}))
    serve()
    wait_for(
        lambda: any(map(ready, cluster.pods(NS, "app.kubernetes.io/name=vllm-roll"))), 60, "ready"
    )
    cluster.kubectl(
        "-n", NS, "set", "image", "deployment/vllm-roll", "vllm=vllm/vllm-openai:v0.9.0"
    )
    wf = wait_for(lambda: workflows_of(argo, "restart-gpu-warmup"), 60, "a warmup restart")[0]
    assert params(wf)["image"] == "vllm/vllm-openai:v0.9.0"
    before = cluster.get(path)
    assert before is not None
    out = run_workflow(cluster, wf)
    after = cluster.get(path)
    assert after is not None
    images = [c["image"] for c in after["spec"]["template"]["spec"]["initContainers"]]
    assert "vllm/vllm-openai:v0.9.0" in images
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    st = after["status"]
    assert st["updatedNumberScheduled"] == st["desiredNumberScheduled"] == 4, st
    assert st["observedGeneration"] == after["metadata"]["generation"]
    assert out and out[0]


def test_a_pull_that_never_ends_is_told_never_deleted(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    slack: SlackStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    serve(policy=POLICY.replace("image_pull: 60", "image_pull: 3"))
    workloads(example_deployment("vllm-pull", replicas=1, shape={"hang": "pull"}))
    told = wait_for(
        lambda: [p for p in slack.posted() if "vllm-pull" in json.dumps(p.body)], 60, "told"
    )
    assert "image" in json.dumps(told[0].body).lower()
    assert not workflows_of(argo, "delete-stuck-inference-pod"), "deleting restarts the pull"


def test_a_crashing_engine_restarts_with_back_off_and_the_timeline_counts_it(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    sel = "app.kubernetes.io/name=vllm-crash"
    shape = {"pull": "1s", "engine": "1s", "crash": "true", "backoff": "2s"}
    with Recorder(cluster, tmp_path / "crash.jsonl") as rec:
        workloads(example_deployment("vllm-crash", replicas=1, shape=shape))

        def restarted_twice() -> bool:
            return any(
                c.get("restartCount", 0) >= 2
                for p in cluster.pods(NS, sel)
                for c in p.get("status", {}).get("containerStatuses", [])
            )

        wait_for(restarted_twice, 60, "two restarts")
        rec.wait_until(
            lambda docs: any(
                c.get("restartCount", 0) >= 2
                for d in docs
                if d["object"]["kind"] == "Pod"
                and d["object"]["metadata"]["name"].startswith("vllm-crash")
                for c in d["object"].get("status", {}).get("containerStatuses", [])
            ),
            30,
            "the recorded watch to show the second restart",
        )
    pods = [json.loads(line)["object"] for line in rec.path.read_text().splitlines()]
    waiting = {
        c["state"].get("waiting", {}).get("reason")
        for p in pods
        if p["kind"] == "Pod"
        for c in p.get("status", {}).get("containerStatuses", [])
    }
    assert "CrashLoopBackOff" in waiting
    timelines = [t for t in replay(rec.path, POLICY, tmp_path) if t["kind"] == "timeline"]
    crash = [t for t in timelines if t["pod"].startswith("vllm-crash")]
    assert crash and crash[0]["restarts"] >= 2, crash
