"""`remediator step hedge-pod` on the real control plane (kube-apiserver, the Deployment and
ReplicaSet controllers, kwok), as the workflow ServiceAccount with deploy/'s RBAC: the surge by
one, the first Ready of the two winning, the loser deleted, the Deployment back at its count;
two stalled pods of one Deployment hedged at once, each by its own step; and a step killed
mid-hedge (SIGKILL) that a rerun carries on without a second surge, or that the exit handler
(`end-hedge`) ends without orphaning the surge.

kwok plays each pod's cold start from its annotations (tests/cluster/stages): the Deployment's
pods hang in engine init; which one comes Ready first is chosen by taking the `hang` annotation
off that pod, as an engine that gets going again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.live.harness import (
    NS,
    REPO,
    LiveCluster,
    deployment,
    deployment_story,
    example_deployment,
    run_step,
    wait_for,
)
from tests.live.test_incidents import ready

HANG = {"pull": "1s", "init": "1s", "start": "1s", "engine": "1s", "hang": "engine"}
HEDGE = "remediator.io/hedge"
HEDGED = "remediator.io/hedged"

Workloads = Callable[[dict[str, Any]], dict[str, Any]]


def _pods(cluster: LiveCluster, name: str) -> list[dict[str, Any]]:
    """The Deployment's pods that are not going."""
    pods = cluster.pods(NS, f"app.kubernetes.io/name={name}")
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _engine_started(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return any("running" in s.get("state", {}) for s in statuses)


def _get_going(cluster: LiveCluster, pod: dict[str, Any]) -> None:
    """The engine gets going again: kwok plays it to Ready."""
    patch = {"metadata": {"annotations": {"cold-start.remediator.dev/hang": None}}}
    cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}", patch,
                ctype="application/merge-patch+json")  # fmt: skip


def _stalled(cluster: LiveCluster, workloads: Workloads, name: str) -> dict[str, Any]:
    """A one-replica Deployment whose pod hangs in engine init; returns that pod."""
    workloads(example_deployment(name, replicas=1, shape=HANG))
    return wait_for(
        lambda: (ps := _pods(cluster, name)) and _engine_started(ps[0]) and ps[0],
        60,
        f"{name}'s pod in engine init",
    )


def _argv(name: str, pod: dict[str, Any], *extra: str) -> list[str]:
    meta = pod["metadata"]
    return ["step", "hedge-pod", "-n", NS, "--deployment", name, "--pod", meta["name"],
            "--uid", meta["uid"], "--poll-interval", "0.3", "--incident", "hedge-live",
            *extra]  # fmt: skip


class Step:
    """A step running as its pod would (the workflow ServiceAccount), in the background."""

    def __init__(self, cluster: LiveCluster, argv: list[str]) -> None:
        kubeconfig = cluster.sa_kubeconfig("argo", "remediator-workflow")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "remediator", *argv], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def verdict(self, timeout: float = 120) -> tuple[int, dict[str, Any]]:
        out, err = self.proc.communicate(timeout=timeout)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        assert len(lines) == 1, (out, err)
        return self.proc.returncode, json.loads(lines[0])

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


@pytest.fixture
def steps() -> Iterator[list[Step]]:
    started: list[Step] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.kill()


def _surged(cluster: LiveCluster, name: str, stalled: dict[str, Any]) -> dict[str, Any]:
    """Wait for the surge and the hedge pod; returns the hedge pod."""
    uid = stalled["metadata"]["uid"]

    def hedge_pod() -> dict[str, Any] | None:
        dep = deployment(cluster, name)
        if dep["spec"]["replicas"] != 2 or HEDGE not in dep["metadata"].get("annotations", {}):
            return None
        fresh = [p for p in _pods(cluster, name) if p["metadata"]["uid"] != uid]
        return fresh[0] if fresh and _engine_started(fresh[0]) else None

    return wait_for(hedge_pod, 60, "the surge and the hedge pod in engine init")


def _hedge_notes(cluster: LiveCluster, name: str) -> dict[str, dict[str, Any]]:
    """The hedge step's annotation as the Deployment has it now: its entries by stalled pod."""
    note = deployment(cluster, name)["metadata"].get("annotations", {}).get(HEDGE)
    return {h["uid"]: h for h in json.loads(note)} if note else {}


def _scheduled_at(cluster: LiveCluster, name: str, uid: str) -> float:
    """The PodScheduled condition's time of the workload's pod `uid`, seconds since the epoch."""
    (pod,) = [p for p in _pods(cluster, name) if p["metadata"]["uid"] == uid]
    (when,) = [c["lastTransitionTime"] for c in pod["status"]["conditions"]
               if c["type"] == "PodScheduled"]  # fmt: skip
    return datetime.fromisoformat(when).timestamp()


def _settled(cluster: LiveCluster, name: str, *uids: str, replicas: int = 1) -> dict[str, Any]:
    """The Deployment back at its replicas, its hedges ended, as many pods left."""

    def done() -> dict[str, Any] | None:
        dep = deployment(cluster, name)
        notes = dep["metadata"].get("annotations", {})
        hedged = notes.get(HEDGED, "").split(",")
        if dep["spec"]["replicas"] != replicas or HEDGE in notes or set(uids) - set(hedged):
            return None
        return dep if len(_pods(cluster, name)) == replicas else None

    return wait_for(done, 60, f"{replicas} replica(s), the hedges ended, as many pods")


def _hedging(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step], name: str
) -> tuple[dict[str, Any], Step, dict[str, Any]]:
    """A stalled pod of a new workload, its hedge-pod step running (120 s), the surge made:
    the stalled pod, the step, the hedge pod."""
    stalled = _stalled(cluster, workloads, name)
    steps.append(step := Step(cluster, _argv(name, stalled, "--timeout", "120")))
    return stalled, step, _surged(cluster, name, stalled)


def test_the_hedge_pod_ready_first_wins_and_the_stalled_pod_is_deleted(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step]
) -> None:
    name = "vllm-hedge-a"
    stalled, step, hedge = _hedging(cluster, workloads, steps, name)
    uid = stalled["metadata"]["uid"]
    (plan,) = json.loads(deployment(cluster, name)["metadata"]["annotations"][HEDGE])
    assert (plan["uid"], plan["replicas"], plan["before"]) == (uid, 1, [uid])
    # The hedge pod has a node: the step names it racing, and the core leaves the stalled
    # pod to the hedge meanwhile (policy.hedge.left_to_hedge).
    racing = wait_for(
        lambda: _hedge_notes(cluster, name)[uid].get("racing"), 30, "the hedge pod racing"
    )
    assert racing == hedge["metadata"]["uid"]
    # with when it was scheduled, as the API server has it: the hedge budget charges from then
    assert _hedge_notes(cluster, name)[uid]["racing_since"] == _scheduled_at(cluster, name, racing)
    _get_going(cluster, hedge)
    code, verdict = step.verdict()
    assert code == 0, verdict
    assert verdict["outcome"] == "hedged_hedge_won", verdict
    assert verdict["winner"] == hedge["metadata"]["name"]
    assert verdict["deleted"] == stalled["metadata"]["name"] and verdict["replicas"] == 1
    # surge, the racer named (annotations count as changes), return
    assert _settled(cluster, name, uid)["metadata"]["generation"] == 4
    (left,) = _pods(cluster, name)
    assert left["metadata"]["uid"] == hedge["metadata"]["uid"] and ready(left)


def test_the_stalled_pod_ready_first_wins_and_the_hedge_pod_is_deleted(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step]
) -> None:
    name = "vllm-hedge-b"
    stalled, step, hedge = _hedging(cluster, workloads, steps, name)
    uid = stalled["metadata"]["uid"]
    _get_going(cluster, stalled)
    code, verdict = step.verdict()
    assert (code, verdict["outcome"]) == (0, "hedged_stalled_won"), verdict
    assert verdict["deleted"] == hedge["metadata"]["name"]
    _settled(cluster, name, uid)
    (left,) = _pods(cluster, name)
    assert left["metadata"]["uid"] == uid and ready(left)
    # Run again (Argo's retry after the end): the hedge is done, nothing changes.
    again = run_step(cluster, _argv(name, stalled), {})
    assert json.loads(again.stdout)["outcome"] in ("already_hedged", "spared"), again.stdout
    assert deployment(cluster, name)["spec"]["replicas"] == 1


def test_a_step_killed_mid_hedge_is_carried_on_by_its_rerun_without_a_second_surge(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step]
) -> None:
    name = "vllm-hedge-c"
    stalled, first, hedge = _hedging(cluster, workloads, steps, name)
    uid = stalled["metadata"]["uid"]
    first.kill()  # SIGKILL mid-hedge: Argo's retry runs the step again
    steps.append(rerun := Step(cluster, _argv(name, stalled, "--timeout", "120")))
    _get_going(cluster, hedge)
    code, verdict = rerun.verdict()
    assert (code, verdict["outcome"]) == (0, "hedged_hedge_won"), verdict
    # The Deployment changed three times, the surge, the racer named (by the first step or
    # its rerun, once) and the return: the rerun found the hedge and never surged again
    # (generation 1 at creation).
    assert _settled(cluster, name, uid)["metadata"]["generation"] == 4
    assert {p["metadata"]["uid"] for p in _pods(cluster, name)} == {hedge["metadata"]["uid"]}


def test_the_exit_handler_ends_a_hedge_its_step_left_and_deletes_nothing(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step]
) -> None:
    name = "vllm-hedge-d"
    stalled, first, _ = _hedging(cluster, workloads, steps, name)
    uid = stalled["metadata"]["uid"]
    first.kill()  # out of retries: the workflow fails, its exit handler runs
    end = ["step", "end-hedge", "-n", NS, "--deployment", name, "--uid", uid]
    done = run_step(cluster, end, {})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "given_up"
    _settled(cluster, name, uid)  # one pod left: the ReplicaSet chose which
    again = run_step(cluster, end, {})
    assert json.loads(again.stdout)["outcome"] == "nothing_to_end"


def test_two_stalled_pods_are_hedged_at_once_and_each_race_ends_on_its_own(
    cluster: LiveCluster, workloads: Workloads, steps: list[Step]
) -> None:
    """Both pods of a Deployment stall; their two steps run at once (one workflow mutex per
    pod): surged by one each, one annotation entry each, each new pod racing one stalled pod.
    One hedge pod gets going and beats its stalled pod; the other stalled pod gets going and
    beats its hedge pod. The Deployment ends at its two replicas, one pod of each race."""
    name = "vllm-hedge-g"
    # One GPU a pod: four pods at the surge's height, on a cluster other tests share.
    workloads(example_deployment(name, replicas=2, shape=HANG, gpus=1))
    first, second = wait_for(
        lambda: len(ps := [p for p in _pods(cluster, name) if _engine_started(p)]) == 2 and ps,
        60,
        "both pods in engine init",
    )
    uids = {p["metadata"]["uid"] for p in (first, second)}
    for p in (first, second):
        steps.append(Step(cluster, _argv(name, p, "--timeout", "120")))

    def both_racing() -> dict[str, Any] | None:
        r = {u: h.get("racing") for u, h in _hedge_notes(cluster, name).items()}
        return r if len(r) == 2 and all(r.values()) else None

    racers = _waiting(cluster, name, both_racing, steps, "both hedges running, each with a racer")
    dep = deployment(cluster, name)
    assert dep["spec"]["replicas"] == 4 and set(racers) == uids
    assert len(set(racers.values())) == 2 and not set(racers.values()) & uids  # one pod each
    assert {h["replicas"] for h in _hedge_notes(cluster, name).values()} == {2}
    pods = {p["metadata"]["uid"]: p for p in _pods(cluster, name)}
    _get_going(cluster, pods[racers[first["metadata"]["uid"]]])
    _get_going(cluster, second)
    verdicts = [s.verdict() for s in steps]
    outcomes = {v["outcome"]: v for code, v in verdicts if code == 0}
    assert set(outcomes) == {"hedged_hedge_won", "hedged_stalled_won"}, verdicts
    assert outcomes["hedged_hedge_won"]["deleted"] == first["metadata"]["name"]
    loser = pods[racers[second["metadata"]["uid"]]]["metadata"]["name"]
    assert outcomes["hedged_stalled_won"]["deleted"] == loser
    _settled(cluster, name, *uids, replicas=2)
    left = {p["metadata"]["uid"] for p in _pods(cluster, name)}
    assert left == {racers[first["metadata"]["uid"]], second["metadata"]["uid"]}


def _waiting(
    cluster: LiveCluster, name: str, check: Callable[[], Any], steps: list[Step], what: str
) -> Any:
    """`wait_for(check)`; timed out, it says where the Deployment, its pods and the steps
    were."""

    def story() -> str:
        done = [s.proc.communicate(timeout=5) for s in steps if s.proc.poll() is not None]
        return f"{deployment_story(cluster, name)}, steps ended {done}"

    return wait_for(check, 90, what, story)


def _annotate(cluster: LiveCluster, name: str, notes: dict[str, Any], **spec: Any) -> None:
    body: dict[str, Any] = {"metadata": {"annotations": notes}}
    if spec:
        body["spec"] = spec
    cluster.api("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{name}", body,
                ctype="application/merge-patch+json")  # fmt: skip


OTHER_UID = "0b6c1a9e-8b7d-4c6e-9f01-23456789abcd"


def _plan(uid: str, deadline: float) -> str:
    doc = {"pod": "vllm-other", "uid": uid, "replicas": 1, "before": [], "deadline": deadline}
    return json.dumps(doc)


def test_refusals_change_nothing_and_an_orphaned_hedge_is_ended_by_the_next(
    cluster: LiveCluster, workloads: Workloads
) -> None:
    name = "vllm-hedge-e"
    stalled = _stalled(cluster, workloads, name)
    uid = stalled["metadata"]["uid"]
    generation = deployment(cluster, name)["metadata"]["generation"]
    # A server-side dry run: the API server checks the surge, stores nothing.
    dry = run_step(cluster, _argv(name, stalled, "--dry-run"), {})
    assert (dry.returncode, json.loads(dry.stdout)["outcome"]) == (0, "would_hedge"), dry.stderr
    assert deployment(cluster, name)["metadata"]["generation"] == generation
    # Another pod's hedge runs on this Deployment (as a release before wrote it) and the count
    # is not what it left (1, not 1 + 1: someone changed it meanwhile): not hedged (exit 3),
    # nothing changed.
    _annotate(cluster, name, {HEDGE: _plan(OTHER_UID, 4102444800.0)})  # 2100-01-01
    generation = deployment(cluster, name)["metadata"]["generation"]  # annotations count as changes
    busy = run_step(cluster, _argv(name, stalled), {})
    assert busy.returncode == 3 and json.loads(busy.stdout)["reason"] == "busy"
    dep = deployment(cluster, name)
    assert (dep["spec"]["replicas"], dep["metadata"]["generation"]) == (1, generation)
    # ... one past its deadline is an orphan (its workflow and exit handler gone): the next
    # hedge ends it (leaving the count its owner no longer holds) and hedges its own pod.
    _annotate(cluster, name, {HEDGE: _plan(OTHER_UID, 1.0)})
    generation = deployment(cluster, name)["metadata"]["generation"]
    done = run_step(cluster, _argv(name, stalled, "--timeout", "1"), {})
    verdict = json.loads(done.stdout)
    assert (done.returncode, verdict["outcome"]) == (4, "timeout"), done.stderr
    dep = _settled(cluster, name, uid)  # back to one, its own hedge recorded
    # The orphan ended; its own surge and return, and its racer named where the hedge pod got
    # a node within the step's second (one more change): never a second surge.
    assert dep["metadata"]["generation"] in (generation + 3, generation + 4)
    assert {p["metadata"]["uid"] for p in _pods(cluster, name)} == {uid}


def test_a_deployment_rolling_out_is_not_hedged(cluster: LiveCluster, workloads: Workloads) -> None:
    """A new template on two replicas (maxSurge 0, maxUnavailable 1): one old pod goes, the new
    one hangs too, and one old pod stays, stalled: a surge now could go to either template."""
    name = "vllm-hedge-f"
    workloads(example_deployment(name, replicas=2, shape=HANG))
    wait_for(lambda: len([p for p in _pods(cluster, name) if _engine_started(p)]) == 2, 60, "2")
    old = {p["metadata"]["labels"]["pod-template-hash"] for p in _pods(cluster, name)}
    template = {"template": {"metadata": {"annotations": {"rolled": "1"}}}}
    cluster.api("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{name}", {"spec": template},
                ctype="application/merge-patch+json")  # fmt: skip

    def rolling() -> dict[str, Any] | None:
        pods = _pods(cluster, name)
        hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in pods}
        stale = [p for p in pods if p["metadata"]["labels"]["pod-template-hash"] in old]
        return stale[0] if len(pods) == 2 and hashes - old and stale else None

    stalled = wait_for(rolling, 60, "one old pod and one of the new template")
    generation = deployment(cluster, name)["metadata"]["generation"]
    refused = run_step(cluster, _argv(name, stalled), {})
    verdict = json.loads(refused.stdout)
    assert (refused.returncode, verdict["reason"]) == (3, "rolling_out"), verdict
    dep = deployment(cluster, name)
    assert dep["spec"]["replicas"] == 2 and dep["metadata"]["generation"] == generation
