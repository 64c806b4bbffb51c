"""serve -> the real Argo Server (argo-workflows SDK) -> the real workflow-controller -> a step pod
on a kwok GPU node -> its command line run as its ServiceAccount against the real API server ->
the phase back to serve, Slack (a stand-in) and the metrics. See conftest.py for what is real."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from tests.live.argo.kubelet import StepRunner
from tests.live.argo.relay import Relay
from tests.live.argo.watch import PhaseWatch
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.standins.slack_server import SlackStandin

TEMPLATE = "delete-stuck-inference-pod"
HANG = "cold-start.remediator.dev/hang"


def hung_pod(
    cluster: LiveCluster, workloads: Callable[[dict[str, Any]], dict[str, Any]], name: str
) -> dict[str, Any]:
    """Two vLLM pods of one model (serve already watching); one is made to hang in engine init
    (its annotation set before kwok plays its start, as tests/live does): serve deletes it."""
    sel = f"app.kubernetes.io/name={name}"
    workloads(example_deployment(name, replicas=2, shape={"pull": "1s", "engine": "3s"}))
    pods = wait_for(lambda: len(cluster.pods(NS, sel)) == 2 and cluster.pods(NS, sel), 30, "pods")
    hung = min(pods, key=lambda p: p["metadata"]["name"])
    patch = {"metadata": {"annotations": {HANG: "engine"}}}
    path = f"/api/v1/namespaces/{NS}/pods/{hung['metadata']['name']}"
    cluster.api("PATCH", path, patch, ctype="application/strategic-merge-patch+json")
    return dict(hung)


def workflows_for(cluster: LiveCluster, pod: str) -> list[dict[str, Any]]:
    """The Workflows serve submitted about `pod`, by the parameters it submitted them with.
    (Not by the template's `remediator.io/target` annotation: the controller writes that
    when it takes a Workflow up, and in CI run E of stop 32 it was not on a Workflow 30 s
    after that Workflow had ended Succeeded.)"""
    items = cluster.api("GET", "/apis/argoproj.io/v1alpha1/namespaces/argo/workflows")["items"]
    return [w for w in items if _about(w) == (NS, pod)]


def _about(wf: dict[str, Any]) -> tuple[str | None, str | None]:
    given = wf.get("spec", {}).get("arguments", {}).get("parameters", [])
    params = {p.get("name"): p.get("value") for p in given}
    return params.get("namespace"), params.get("pod")


def workflow_for(cluster: LiveCluster, pod: str) -> dict[str, Any]:
    """The one Workflow about `pod` (the server has it once serve's submit returned)."""
    (wf,) = wait_for(lambda: workflows_for(cluster, pod), 30, f"the Workflow of {pod}")
    return wf


def end_reply(slack: SlackStandin) -> Any:
    replies = [p for p in slack.posted() if p.body.get("thread_ts")]
    return replies[-1] if replies else None


def test_a_stuck_pod_is_deleted_by_a_real_workflow_and_its_phase_is_told(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    serve_argo: Callable[..., Serve],
    steps: StepRunner,
    slack: SlackStandin,
) -> None:
    with PhaseWatch(cluster) as phases:
        serve = serve_argo()
        pod = hung_pod(cluster, workloads, "vllm-argo-ok")
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        reply = wait_for(lambda: end_reply(slack), 120, "the end reply in Slack")
        wf = workflow_for(cluster, name)
        wf_name = wf["metadata"]["name"]
        wait_for(lambda: phases.phases.get(wf_name, [""])[-1] == "Succeeded", 10, "watched end")

    # The Workflow the controller runs: the template, the parameters serve sent.
    assert wf["spec"]["workflowTemplateRef"] == {"name": TEMPLATE}
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert (params["namespace"], params["pod"], params["uid"]) == (NS, name, uid)
    assert wf["metadata"]["labels"]["remediator.io/action"] == "delete-pod"
    assert wf["status"]["phase"] == "Succeeded"
    # Real phases, as a watch on the API server saw them: created without a phase, then Running,
    # then Succeeded; serve reads a missing phase as Pending. The controller writes Pending only
    # while the workflow waits (its workload's mutex held by another workflow, or the
    # controller's parallelism: in one CI run, in random order, a workflow of an earlier test
    # was still about), so a Pending may come first, never after Running.
    seen = [p for p in phases.phases[wf_name] if p]
    assert seen in (["Running", "Succeeded"], ["Pending", "Running", "Succeeded"]), phases.phases

    # The step pod: the template's ServiceAccount and the command line `remediator step` parses.
    (ran,) = steps.runs(wf_name)
    assert ran.executed and ran.exit_code == 0, ran.output
    assert ran.service_account == "remediator-workflow"
    # the phase it was found stuck in: the step reads the pod again and spares it once it left it
    assert params["phase"] == "engine_init"
    assert ran.argv == ("remediator", "step", "delete-pod", "--namespace", NS, "--pod", name,
                        "--uid", uid, "--phase", "engine_init")  # fmt: skip
    assert ran.env["REMEDIATOR_INCIDENT"] == params["incident"]
    # ... and its effect is real: that pod instance is gone (its ReplicaSet made another).
    wait_for(lambda: uid not in {p["metadata"]["uid"] for p in cluster.pods(NS)}, 60, "deleted")

    # The end reaches on-call and the metric.
    assert "Succeeded" in reply.body["text"] and wf_name in reply.body["text"]
    assert (
        serve.sample("remediator_workflows_ended_total", action="delete-pod", phase="Succeeded")
        == 1
    )


def test_a_failed_step_fails_the_workflow_and_on_call_is_told(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    serve_argo: Callable[..., Serve],
    steps: StepRunner,
    slack: SlackStandin,
) -> None:
    serve = serve_argo()
    pod = hung_pod(cluster, workloads, "vllm-argo-fail")
    # main exits 1 (by annotation): not retried (the template retries only 5)
    steps.fail_next(pod["metadata"]["name"], 1)
    reply = wait_for(lambda: end_reply(slack), 120, "the end reply in Slack")
    wf = workflow_for(cluster, pod["metadata"]["name"])

    assert wf["status"]["phase"] == "Failed"
    (ran,) = steps.runs(wf["metadata"]["name"])
    assert not ran.executed and ran.exit_code == 1
    # Argo's own words for it, on the failed node (the stand-in only echoes a scripted message).
    messages = [n.get("message", "") for n in wf["status"]["nodes"].values()]
    assert any("exit code 1" in m for m in messages), messages
    assert "Failed" in reply.body["text"]
    assert reply.body.get("reply_broadcast") is True  # a failure goes to the channel too
    assert (
        serve.sample("remediator_workflows_ended_total", action="delete-pod", phase="Failed") == 1
    )
    # Nothing was deleted: the step never ran.
    assert pod["metadata"]["uid"] in {p["metadata"]["uid"] for p in cluster.pods(NS)}


def test_serve_killed_between_submit_and_record_resubmits_into_a_real_409(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    serve_argo: Callable[..., Serve],
    steps: StepRunner,
    slack: SlackStandin,
    real_argo: Any,
) -> None:
    """The relay passes the submit to the real server, then SIGKILLs serve before serve reads
    the answer: the Workflow exists, serve's outbox row does not know it."""
    relay = Relay(real_argo.server_url)
    try:
        first = serve_argo(argo_url=relay.url)
        relay.on_submitted = lambda status, body: first.kill()
        pod = hung_pod(cluster, workloads, "vllm-argo-kill")
        wait_for(lambda: first.proc is not None and first.proc.poll() is not None, 120, "killed")
    finally:
        relay.close()
    assert relay.submits == [200]
    wf = workflow_for(cluster, pod["metadata"]["name"])
    wf_name = wf["metadata"]["name"]
    with sqlite3.connect(first.workdir / "state.db") as db:
        rows = db.execute("SELECT action, state, workflow FROM outbox").fetchall()
    assert rows == [("delete-pod", "pending", None)], rows

    second = serve_argo()  # same state; waits out the dead leader's Lease
    reply = wait_for(lambda: end_reply(slack), 120, "the end reply in Slack")
    assert "Succeeded" in reply.body["text"]
    assert (
        second.sample("remediator_executions_total", action="delete-pod", result="duplicate") == 1
    )
    assert len(workflows_for(cluster, pod["metadata"]["name"])) == 1
    (ran,) = steps.runs(wf_name)  # the step ran once, for the one Workflow
    assert ran.executed and ran.exit_code == 0, ran.output


def test_a_step_that_could_not_ask_is_retried_by_the_controller(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    serve_argo: Callable[..., Serve],
    steps: StepRunner,
    slack: SlackStandin,
) -> None:
    """Exit 5 ("could not ask") matches the template's retry expression: the real controller
    makes a second pod after the backoff, whose step runs and succeeds (the stand-in has no
    retries at all)."""
    serve = serve_argo()
    pod = hung_pod(cluster, workloads, "vllm-argo-retry")
    steps.fail_next(pod["metadata"]["name"], 5)
    reply = wait_for(lambda: end_reply(slack), 150, "the end reply in Slack")
    wf = workflow_for(cluster, pod["metadata"]["name"])
    first, second = steps.runs(wf["metadata"]["name"])
    assert (first.executed, first.exit_code) == (False, 5)
    assert (second.executed, second.exit_code) == (True, 0), second.output
    assert first.pod != second.pod and first.argv == second.argv
    pods = [n for n in wf["status"]["nodes"].values() if n["type"] == "Pod"]
    phases = [n["phase"] for n in sorted(pods, key=lambda n: n["startedAt"])]
    assert phases == ["Failed", "Succeeded"]
    assert wf["status"]["phase"] == "Succeeded" and "Succeeded" in reply.body["text"]
    ended = serve.sample("remediator_workflows_ended_total", action="delete-pod", phase="Succeeded")
    assert ended == 1
