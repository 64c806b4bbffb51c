"""Hedged starts end to end (issue 20): serve finds a pod stalled in a vLLM step, decides
`hedge-pod`, the real Argo runs `hedge-stalled-pod`, its step surges the Deployment on the real
API server; the first of the two pods Ready wins, the other is deleted, the Deployment ends at
its replica count. serve is SIGKILLed mid-hedge and restarted on its state file: no orphan (the
surge ends with its workflow) and no second hedge (one workflow, one surge; the restarted
engine's own decision for the same stall is held by the stored guard state).

kwok serves no container logs, so vLLM's lines reach serve as the follower would hand them in:
`EngineLog` inputs, posted to its /events (real lines from tests/data/vllm_logs, at the times
the pod's own container start gives them)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.data import vllm_logs
from tests.live.argo.kubelet import StepRunner
from tests.live.argo.test_workflows import workflow_for, workflows_for
from tests.live.harness import (
    NS,
    LiveCluster,
    Serve,
    deployment,
    deployment_story,
    example_deployment,
    wait_for,
)
from tests.live.test_incidents import ready

Workloads = Callable[[dict[str, Any]], dict[str, Any]]
HANG = "cold-start.remediator.dev/hang"
# A stall is found 3 s into a step the siblings went through in ~1 s; it would count as hung
# only after 100 checks (then deleted): the hedge is what acts here.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm-inference]
  budgets: {engine_init: 600}
  checks: 100
  check_interval_s: 1
  adaptive: {min_samples: 1, min_siblings: 1}
  progress: {enabled: true, factor: 1, floor_s: 3, min_samples: 1}
  hedge: {enabled: true, timeout_s: 240}
guardrails:
  cooldown: {seconds: 0}
  hedge_budget: {max_percent: 100, charge_cold_starts: 0.1}
"""
LOADING = next(ln for ln in vllm_logs.lines("2025-04-v0.7-v0-profiling.log")
               if "Starting to load model" in ln)  # fmt: skip
LOADED = next(ln for ln in vllm_logs.lines("2025-11-v1-engine.log") if "Model loading took" in ln)


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _started(pod: dict[str, Any]) -> float | None:
    for s in pod.get("status", {}).get("containerStatuses") or []:
        running = s.get("state", {}).get("running")
        if running:
            return _time(running["startedAt"])
    return None


def _post(serve: Serve, *docs: dict[str, Any]) -> None:
    for doc in docs:
        req = urllib.request.Request(f"http://127.0.0.1:{serve.port}/events",
                                     data=json.dumps(doc).encode(), method="POST")  # fmt: skip
        req.add_header("Authorization", f"Bearer {serve.webhook_token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 202


def _running(cluster: LiveCluster, name: str) -> dict[str, Any]:
    sel = f"app.kubernetes.io/name={name}"
    return wait_for(
        lambda: next((p for p in cluster.pods(NS, sel)
                      if _started(p) and not p["metadata"].get("deletionTimestamp")), None),
        60, f"{name}'s engine started",
    )  # fmt: skip


def _sibling(cluster: LiveCluster, serve: Serve, workloads: Workloads, name: str) -> None:
    """A healthy pod of the model whose log says it loaded its weights in a second: the
    history a stall is judged by."""
    workloads(example_deployment(name, replicas=1, shape={"engine": "8s"}))
    pod = _running(cluster, name)
    started, meta = _started(pod), pod["metadata"]
    assert started is not None
    _post(serve, vllm_logs.engine_log(NS, meta["name"], LOADING, started + 0.2, meta["uid"]),
          vllm_logs.engine_log(NS, meta["name"], LOADED, started + 1.2, meta["uid"]))  # fmt: skip
    sel = f"app.kubernetes.io/name={name}"
    wait_for(lambda: any(ready(p) for p in cluster.pods(NS, sel)), 60, f"{name} Ready")


def _stall(serve: Serve, pod: dict[str, Any]) -> None:
    """Its log says it began loading weights, then nothing."""
    meta, started = pod["metadata"], _started(pod)
    assert started is not None
    _post(serve, vllm_logs.engine_log(NS, meta["name"], LOADING, started + 0.2, meta["uid"]))


def _hedge_pod(cluster: LiveCluster, name: str, stalled_uid: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        if deployment(cluster, name)["spec"]["replicas"] != 2:
            return None
        sel = f"app.kubernetes.io/name={name}"
        fresh = [p for p in cluster.pods(NS, sel) if p["metadata"]["uid"] != stalled_uid]
        return fresh[0] if fresh and _started(fresh[0]) else None

    return wait_for(found, 90, "the surge and the hedge pod in engine init")


def test_a_stalled_pod_is_hedged_the_first_ready_wins_and_a_killed_serve_doubles_nothing(
    cluster: LiveCluster,
    workloads: Workloads,
    serve_argo: Callable[..., Serve],
    steps: StepRunner,
) -> None:
    serve = serve_argo(policy=POLICY)
    _sibling(cluster, serve, workloads, "vllm-hedge-sib")
    name = "vllm-hedge-live"
    workloads(example_deployment(name, replicas=1, shape={"engine": "3s", "hang": "engine"}))
    stalled = _running(cluster, name)
    uid = stalled["metadata"]["uid"]
    _stall(serve, stalled)

    # serve decides the hedge; the real Argo runs its step, which surges the Deployment.
    hedge = _hedge_pod(cluster, name, uid)
    wf = workflow_for(cluster, stalled["metadata"]["name"])
    assert wf["spec"]["workflowTemplateRef"] == {"name": "hedge-stalled-pod"}
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert (params["deployment"], params["uid"], params["timeout"]) == (name, uid, "240")
    (decided,) = [x for x in serve.log_lines()
                  if x.get("msg") == "decision" and x.get("action") == "hedge-pod"]  # fmt: skip
    assert "stalled in vLLM step weights" in decided["reason"]
    # The guard charged it, and holds it open until the stalled pod's end is heard.
    assert serve.sample("remediator_hedges_unsettled") == 1
    assert serve.sample("remediator_hedge_budget_gpu_seconds", what="spent") > 0

    # SIGKILL serve mid-hedge; a new one on the same state file. The workflow runs on.
    serve.kill()
    again = serve_argo(policy=POLICY)
    # Its engine starts afresh: a new sibling teaches it the step again, the stalled pod's
    # log is read again, and it finds the same stall: the same hedge, held by what the guard
    # stored.
    cluster.delete(
        f"/api/v1/namespaces/{NS}/pods/{_running(cluster, 'vllm-hedge-sib')['metadata']['name']}"
    )
    _sibling_again(cluster, again, "vllm-hedge-sib")
    _stall(again, stalled)
    held = wait_for(
        lambda: [x for x in again.log_lines()
                 if x.get("msg") == "suppressed" and x.get("action") == "hedge-pod"],
        60, "the restarted serve's hedge of the same pod held",
    )  # fmt: skip
    assert held[0]["guardrail"] == "idempotency", held[0]

    # The hedge pod has a node: the step names it racing (serve leaves the stalled pod to it).
    def racing() -> object:
        notes = deployment(cluster, name)["metadata"].get("annotations", {})
        note = notes.get("remediator.io/hedge")
        return json.loads(note)[0].get("racing") if note else None  # (one entry: one hedge)

    wait_for(lambda: racing() == hedge["metadata"]["uid"], 60, "the hedge pod racing")
    # The hedge pod gets going first: it wins, the stalled pod is deleted, back to one replica.
    patch = {"metadata": {"annotations": {HANG: None}}}
    cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{hedge['metadata']['name']}", patch,
                ctype="application/merge-patch+json")  # fmt: skip

    def settled() -> dict[str, Any] | None:
        dep = deployment(cluster, name)
        notes = dep["metadata"].get("annotations", {})
        pods = [p for p in cluster.pods(NS, f"app.kubernetes.io/name={name}")
                if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
        if dep["spec"]["replicas"] != 1 or "remediator.io/hedge" in notes or len(pods) != 1:
            return None
        return dep if notes.get("remediator.io/hedged") == uid else None

    dep = wait_for(settled, 120, "one replica, the hedge ended")
    # One surge, the racer named, one return (a Deployment's annotations count as changes):
    # never a second surge.
    assert dep["metadata"]["generation"] == 4
    (left,) = [p for p in cluster.pods(NS, f"app.kubernetes.io/name={name}")
               if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
    assert left["metadata"]["uid"] == hedge["metadata"]["uid"]
    wait_for(lambda: uid not in {p["metadata"]["uid"] for p in cluster.pods(NS)}, 60, "deleted")
    # The restarted serve heard the stalled pod's end (its engine decided the same hedge
    # again, held): the charge the stored guard state kept open is settled.
    wait_for(lambda: again.sample("remediator_hedges_unsettled") == 0, 60, "the hedge settled")
    # One workflow, to its end; its step's verdict; the exit handler found nothing to end.
    done = wait_for(
        lambda: [w for w in workflows_for(cluster, stalled["metadata"]["name"])
                 if w.get("status", {}).get("phase") == "Succeeded"],
        120, "the hedge workflow Succeeded",
    )  # fmt: skip
    assert len(done) == 1 and len(workflows_for(cluster, stalled["metadata"]["name"])) == 1
    runs = steps.runs(done[0]["metadata"]["name"])
    assert [r.argv[2] for r in runs] == ["hedge-pod", "end-hedge"], runs
    hedged = json.loads(runs[0].output.splitlines()[0])
    assert (hedged["outcome"], hedged["winner"]) == ("hedged_hedge_won", hedge["metadata"]["name"])
    assert json.loads(runs[1].output.splitlines()[0])["outcome"] == "nothing_to_end"


def _sibling_again(cluster: LiveCluster, serve: Serve, name: str) -> None:
    """The sibling's replacement starts, logs its steps to the new serve, and is Ready."""
    pod = _running(cluster, name)
    started, meta = _started(pod), pod["metadata"]
    assert started is not None
    _post(serve, vllm_logs.engine_log(NS, meta["name"], LOADING, started + 0.2, meta["uid"]),
          vllm_logs.engine_log(NS, meta["name"], LOADED, started + 1.2, meta["uid"]))  # fmt: skip
    uid = meta["uid"]
    sel = f"app.kubernetes.io/name={name}"
    wait_for(
        lambda: any(ready(p) and p["metadata"]["uid"] == uid for p in cluster.pods(NS, sel)),
        60,
        f"{name}'s replacement Ready",
    )


def _submit_hedge(cluster: LiveCluster, deployment: str, pod: dict[str, Any]) -> str:
    """A `hedge-stalled-pod` Workflow for `pod`, as the executor submits one (its name
    deterministic per incident); returns its name."""
    meta = pod["metadata"]
    params = {"namespace": NS, "deployment": deployment, "pod": meta["name"],
              "uid": meta["uid"], "workload": f"{NS}.deployment.{deployment}",
              "incident": f"hedge-two-{meta['uid'][:8]}", "reason": "stalled (live test)",
              "timeout": "120"}  # fmt: skip
    name = f"hedge-two-{meta['uid'][:8]}"
    wf = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": "argo"},
        "spec": {
            "workflowTemplateRef": {"name": "hedge-stalled-pod"},
            "arguments": {"parameters": [{"name": k, "value": v} for k, v in params.items()]},
        },
    }
    cluster.api("POST", "/apis/argoproj.io/v1alpha1/namespaces/argo/workflows", wf)
    return name


def test_two_hedge_workflows_of_one_deployment_run_at_once(
    cluster: LiveCluster, workloads: Workloads, steps: StepRunner
) -> None:
    """The template's mutex is per pod: both stalled pods of one Deployment are hedged at once
    by the real controller (before, the second workflow waited for the first's end). Each race
    ends on its own, and the Deployment at its two replicas."""
    name = "vllm-hedge-two"
    # One GPU a pod: four pods at the surge's height, on a cluster other tests share.
    shape = {"engine": "3s", "hang": "engine"}
    workloads(example_deployment(name, replicas=2, shape=shape, gpus=1))
    sel = f"app.kubernetes.io/name={name}"

    def both_started() -> list[dict[str, Any]] | None:
        started = [p for p in cluster.pods(NS, sel) if _started(p)]
        return started if len(started) == 2 else None

    first, second = wait_for(both_started, 60, "both pods in engine init")
    flows = [_submit_hedge(cluster, name, p) for p in (first, second)]

    def racers() -> dict[str, str] | None:
        dep = deployment(cluster, name)
        note = dep["metadata"].get("annotations", {}).get("remediator.io/hedge")
        found = {h["uid"]: h.get("racing") for h in json.loads(note)} if note else {}
        both = len(found) == 2 and all(found.values()) and dep["spec"]["replicas"] == 4
        return {u: str(r) for u, r in found.items()} if both else None

    def story() -> str:
        ran = [(r.argv[:3], r.exit_code, r.output[-400:]) for f in flows for r in steps.runs(f)]
        return f"{deployment_story(cluster, name)}, steps ended {ran}"

    what = "both hedges running at once, each with its racer"
    raced = wait_for(racers, 120, what, story)
    a, b = first["metadata"]["uid"], second["metadata"]["uid"]
    pods = {p["metadata"]["uid"]: p for p in cluster.pods(NS, sel)}
    for going in (pods[raced[a]], second):  # a's hedge pod, and b itself, get going
        patch = {"metadata": {"annotations": {HANG: None}}}
        cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{going['metadata']['name']}",
                    patch, ctype="application/merge-patch+json")  # fmt: skip

    def succeeded() -> list[dict[str, Any]] | None:
        items = cluster.api("GET", "/apis/argoproj.io/v1alpha1/namespaces/argo/workflows")
        done = [w for w in items["items"] if w["metadata"]["name"] in flows
                and w.get("status", {}).get("phase") == "Succeeded"]  # fmt: skip
        return done if len(done) == 2 else None

    wait_for(succeeded, 180, "both hedge workflows Succeeded")
    outcomes = {}
    for flow in flows:
        hedged = steps.runs(flow)[0]
        outcomes[flow] = json.loads(hedged.output.splitlines()[0])["outcome"]
    assert outcomes == {flows[0]: "hedged_hedge_won", flows[1]: "hedged_stalled_won"}

    def settled() -> set[str] | None:
        dep = deployment(cluster, name)
        left = {p["metadata"]["uid"] for p in cluster.pods(NS, sel)
                if not p["metadata"].get("deletionTimestamp")}  # fmt: skip
        ok = dep["spec"]["replicas"] == 2 and len(left) == 2
        return left if ok and "remediator.io/hedge" not in dep["metadata"]["annotations"] else None

    assert wait_for(settled, 60, "two replicas, the hedges ended") == {raced[a], b}
