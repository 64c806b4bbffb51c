"""`kubectl coldstart` on the real control plane: kwok pods with known stage delays, a pod hung
in engine init beside Ready siblings, a pod waiting for GPUs, a StatefulSet, users whose RBAC
lacks `pods/log` or Events, `--watch` until Ctrl-C, and the same answer as serve's /timelines.

The plugin runs as the installed `kubectl-coldstart` console script with a kubeconfig, as a
user runs it; its identity is the cluster admin or a ServiceAccount token (as the live suite
makes them), never a stand-in."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.support import tool
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import ready

SHAPE = {"pull": "3s", "init": "1s", "start": "2s", "engine": "4s"}
# kwok emits the init container no events, so its run is part of container start (as
# tests/live/test_timelines.py says): pull 3 s, start 1 + 2 s, engine 4 s.
EXPECTED = {"image_pull": 3.0, "container_start": 3.0, "engine_init": 4.0}
TOLERANCE_S = 1.0
PLUGIN = str(Path(sys.executable).parent / "kubectl-coldstart")


def coldstart(
    kubeconfig: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [PLUGIN, "--kubeconfig", str(kubeconfig), "-n", NS, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def docs(out: subprocess.CompletedProcess[str], kind: str) -> list[dict[str, Any]]:
    assert out.returncode == 0, out.stderr
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    return [d for d in lines if d["kind"] == kind]


def all_ready(cluster: LiveCluster, selector: str, n: int) -> bool:
    pods = cluster.pods(NS, selector)
    return len(pods) == n and all(map(ready, pods))


def test_known_stage_delays_within_a_second_per_phase_and_serves_answer(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    s = serve()
    workloads(example_deployment("cs-delays", replicas=3, shape=SHAPE))
    sel = "app.kubernetes.io/name=cs-delays"
    wait_for(lambda: all_ready(cluster, sel, 3), 90, "three Ready pods")
    out = coldstart(cluster.kubeconfig, "deploy/cs-delays", "-o", "json")
    timelines = docs(out, "timeline")
    assert len(timelines) == 3
    for t in timelines:
        assert t["state"] == "ready", t
        for phase, want in EXPECTED.items():
            assert t["phases"][phase] == pytest.approx(want, abs=TOLERANCE_S), (phase, t)
    (workload,) = docs(out, "workload")
    assert workload["workload"] == "deploy/cs-delays" and workload["pods"] == 3
    for phase, want in EXPECTED.items():
        assert workload["phases"][phase]["p50"] == pytest.approx(want, abs=TOLERANCE_S)
        assert workload["phases"][phase]["pods"] == 3
    assert docs(out, "waiting") == []
    # serve, watching the same namespace live, answers /timelines with the same objects
    uids = {t["uid"] for t in timelines}

    def served() -> list[dict[str, Any]] | None:
        url = f"http://127.0.0.1:{s.port}/timelines?namespace={NS}&state=ready"
        with urllib.request.urlopen(url, timeout=5) as r:
            found = [json.loads(line) for line in r.read().splitlines()]
        mine = [d for d in found if d["uid"] in uids]
        return mine if len(mine) == 3 else None

    from_serve = wait_for(served, 30, "serve's three timelines")
    key = lambda d: d["pod"]  # noqa: E731
    assert sorted(from_serve, key=key) == sorted(timelines, key=key)
    text = coldstart(cluster.kubeconfig, "deploy/cs-delays")
    assert text.returncode == 0, text.stderr
    assert f"{NS} deploy/cs-delays: 3 pods (3 ready)" in text.stdout
    assert "█" in text.stdout and "where the time goes" in text.stdout
    assert "\x1b[" not in text.stdout  # not a terminal: no colour


def test_a_pod_hung_in_engine_init_against_its_ready_siblings(
    cluster: LiveCluster, workloads: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    doc = example_deployment("cs-hang", replicas=3, shape={"engine": "3s"})
    doc["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    workloads(doc)
    sel = "app.kubernetes.io/name=cs-hang"
    wait_for(lambda: all_ready(cluster, sel, 3), 90, "three Ready pods")
    # A rollout whose new pod never becomes Ready: the three old ones stay (maxUnavailable 0).
    hung = copy.deepcopy(doc)
    annotations = hung["spec"]["template"]["metadata"]["annotations"]
    annotations["cold-start.remediator.dev/hang"] = "engine"
    cluster.apply([hung])
    wait_for(lambda: len(cluster.pods(NS, sel)) == 4, 60, "the new pod")

    def in_engine_init() -> list[dict[str, Any]] | None:
        waiting = docs(coldstart(cluster.kubeconfig, "deploy/cs-hang", "-o", "json"), "waiting")
        return waiting if waiting and waiting[0]["phase"] == "engine_init" else None

    (w,) = wait_for(in_engine_init, 60, "the new pod in engine init")
    assert w["siblings"]["pods"] == 3
    assert w["siblings"]["p50"] == pytest.approx(3.0, abs=TOLERANCE_S)
    text = coldstart(cluster.kubeconfig, "deploy/cs-hang")
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if "▶ not Ready" in x)
    assert "▶ not Ready: engine_init for " in line
    assert "siblings P50 " in line and "(3 pods)" in line


def test_a_pod_waiting_for_gpus_says_insufficient_gpu(
    cluster: LiveCluster, workloads: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    workloads(example_deployment("cs-nogpu", replicas=1, gpus=16))  # nodes have 8

    def told() -> list[dict[str, Any]] | None:
        waiting = docs(coldstart(cluster.kubeconfig, "deploy/cs-nogpu", "-o", "json"), "waiting")
        return waiting if waiting and waiting[0]["why"] else None

    (w,) = wait_for(told, 60, "the scheduler's verdict")
    assert w["phase"] == "scheduling"
    assert "Insufficient nvidia.com/gpu" in w["why"]
    text = coldstart(cluster.kubeconfig, "deploy/cs-nogpu")
    assert "▶ not Ready: scheduling for" in text.stdout
    assert "scheduler: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu" in text.stdout


@pytest.fixture
def statefulset(cluster: LiveCluster) -> Iterator[dict[str, Any]]:
    doc = example_deployment("cs-sts", replicas=2, shape=SHAPE)
    doc["kind"] = "StatefulSet"
    spec = doc["spec"]
    spec.pop("strategy", None)
    spec.pop("progressDeadlineSeconds", None)
    spec.pop("revisionHistoryLimit", None)
    spec["serviceName"] = "cs-sts"
    spec["podManagementPolicy"] = "Parallel"
    cluster.apply([doc])
    yield doc
    cluster.delete(f"/apis/apps/v1/namespaces/{NS}/statefulsets/cs-sts")
    wait_for(lambda: not cluster.pods(NS, "app.kubernetes.io/name=cs-sts"), 60, "sts pods gone")


def test_a_statefulset(cluster: LiveCluster, statefulset: dict[str, Any]) -> None:
    sel = "app.kubernetes.io/name=cs-sts"
    wait_for(lambda: all_ready(cluster, sel, 2), 90, "two Ready pods")
    out = coldstart(cluster.kubeconfig, "sts/cs-sts", "-o", "json")
    timelines = docs(out, "timeline")
    assert sorted(t["pod"] for t in timelines) == ["cs-sts-0", "cs-sts-1"]
    for t in timelines:
        for phase, want in EXPECTED.items():
            assert t["phases"][phase] == pytest.approx(want, abs=TOLERANCE_S), (phase, t)
    (workload,) = docs(out, "workload")
    assert workload["workload"] == "sts/cs-sts"
    one = docs(coldstart(cluster.kubeconfig, "cs-sts-1", "-o", "json"), "timeline")
    assert [t["pod"] for t in one] == ["cs-sts-1"]
    assert one[0] == next(t for t in timelines if t["pod"] == "cs-sts-1")
    # and as kubectl runs it: a plugin found on PATH as kubectl-coldstart
    env = {**os.environ, "PATH": f"{Path(PLUGIN).parent}{os.pathsep}{os.environ['PATH']}"}
    argv = ["coldstart", "--kubeconfig", str(cluster.kubeconfig), "-n", NS, "sts/cs-sts"]
    via = subprocess.run([tool("kubectl"), *argv], capture_output=True, text=True, env=env)
    assert via.returncode == 0, via.stderr
    assert via.stdout.startswith(f"{NS} sts/cs-sts: 2 pods (2 ready)")


def test_the_users_kubeconfig_context_and_namespace(
    cluster: LiveCluster, statefulset: dict[str, Any], tmp_path: Path
) -> None:
    """$KUBECONFIG and its current context's namespace, as kubectl takes them; --context."""
    wait_for(lambda: all_ready(cluster, "app.kubernetes.io/name=cs-sts", 2), 90, "Ready pods")
    cfg = json.loads(cluster.kubeconfig.read_text())
    ctx = cfg["contexts"][0]["context"]
    cfg["contexts"] = [
        {"name": "inference", "context": {**ctx, "namespace": NS}},
        {"name": "elsewhere", "context": {**ctx, "namespace": "default"}},
    ]
    cfg["current-context"] = "inference"
    path = tmp_path / "config"
    path.write_text(json.dumps(cfg))
    env = {**os.environ, "KUBECONFIG": str(path)}
    run = lambda *a: subprocess.run(  # noqa: E731
        [PLUGIN, *a], capture_output=True, text=True, timeout=60, env=env
    )
    mine = run("sts/cs-sts")
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.startswith(f"{NS} sts/cs-sts: 2 pods (2 ready)")
    other = run("--context", "elsewhere", "sts/cs-sts")
    assert other.returncode == 1
    assert other.stderr.strip() == 'error: statefulset "cs-sts" not found in namespace default'


def _reader(cluster: LiveCluster, name: str, rules: list[dict[str, Any]]) -> Path:
    """A ServiceAccount with exactly `rules` in NS, and a kubeconfig with its token."""
    meta = {"name": name, "namespace": NS}
    cluster.apply(
        [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": rules,
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
            },
        ]
    )
    return cluster.sa_kubeconfig(NS, name)


READ = ["get", "list", "watch"]
PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": READ}
EVENTS = [
    {"apiGroups": [""], "resources": ["events"], "verbs": READ},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": READ},
]
WORKLOADS = {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets"], "verbs": ["get"]}


def test_without_pods_log_it_says_so_once_and_shows_everything_else(
    cluster: LiveCluster, workloads: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    workloads(example_deployment("cs-nolog", replicas=2, shape=SHAPE))
    wait_for(lambda: all_ready(cluster, "app.kubernetes.io/name=cs-nolog", 2), 90, "Ready pods")
    kubeconfig = _reader(cluster, "cs-no-logs", [PODS, *EVENTS, WORKLOADS])
    out = coldstart(kubeconfig, "deploy/cs-nolog", "--logs")
    assert out.returncode == 0, out.stderr
    who = f"system:serviceaccount:{NS}:cs-no-logs"
    said = f"forbidden ({who}): cannot get pods/log in namespace {NS} (need: get pods/log)"
    assert out.stderr.count(said) == 1, out.stderr
    assert "engine-init steps are not shown" in out.stderr
    assert f"{NS} deploy/cs-nolog: 2 pods (2 ready)" in out.stdout
    bars = re.findall(r"^  engine_init +(\d+\.\d)s █+$", out.stdout, re.M)
    assert len(bars) == 2 and "where the time goes" in out.stdout
    as_json = docs(coldstart(kubeconfig, "deploy/cs-nolog", "--logs", "-o", "json"), "timeline")
    for t in as_json:
        for phase, want in EXPECTED.items():
            assert t["phases"][phase] == pytest.approx(want, abs=TOLERANCE_S), (phase, t)
    # Allowed, but no kubelet serves the log (kwok plays the kubelet and has no log endpoint:
    # the API server's own 500 for each pod): one line for them all, everything else shown.
    admin = coldstart(cluster.kubeconfig, "deploy/cs-nolog", "--logs")
    assert admin.returncode == 0, admin.stderr
    (warning,) = admin.stderr.splitlines()
    assert warning.startswith("warning: logs not read: cs-nolog-"), warning
    assert warning.endswith("(and 1 more)"), warning
    assert len(re.findall(r"^  engine_init +(\d+\.\d)s █+$", admin.stdout, re.M)) == 2


def test_a_refusal_names_the_verb_and_resource(cluster: LiveCluster) -> None:
    no_events = _reader(cluster, "cs-no-events", [PODS, WORKLOADS])
    out = coldstart(no_events, "-l", "app=vllm-inference")
    assert out.returncode == 3
    who = f"system:serviceaccount:{NS}:cs-no-events"
    assert out.stderr.strip() == (
        f"error: forbidden ({who}): cannot list events in namespace {NS} (need: list events)"
    )
    assert out.stdout == ""
    no_deploy = _reader(cluster, "cs-no-deploy", [PODS, *EVENTS])
    out = coldstart(no_deploy, "deploy/anything")
    assert out.returncode == 3
    assert "cannot get deployments in namespace" in out.stderr
    assert "(need: get deployments)" in out.stderr
    missing = coldstart(cluster.kubeconfig, "deploy/no-such-deployment")
    assert missing.returncode == 1
    assert 'deployment "no-such-deployment" not found' in missing.stderr


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_watch_follows_a_scale_up_live_and_ctrl_c_exits_0(
    cluster: LiveCluster, workloads: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    argv = [PLUGIN, "--kubeconfig", str(cluster.kubeconfig), "-n", NS, "-o", "json", "--watch"]
    proc = subprocess.Popen(
        [*argv, "-l", "app.kubernetes.io/name=cs-watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # started with SIGINT ignored, as a background job of a shell without job control
        # (a CI runner) starts it: Ctrl-C must still end --watch
        preexec_fn=_sigint_ignored,
    )
    seen: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: seen.extend(json.loads(x) for x in proc.stdout or ()), daemon=True
    )
    reader.start()
    try:
        workloads(example_deployment("cs-watch", replicas=2, shape=SHAPE))

        def ready_twice() -> bool:
            states = {d["pod"]: d["state"] for d in list(seen) if d["kind"] == "timeline"}
            return len(states) == 2 and set(states.values()) == {"ready"}

        wait_for(ready_twice, 90, "both pods followed to Ready")
        scaled = example_deployment("cs-watch", replicas=1, shape=SHAPE)
        cluster.apply([scaled])

        def one_deleted() -> bool:
            return any(d["kind"] == "timeline" and d["state"] == "deleted" for d in list(seen))

        wait_for(one_deleted, 60, "the scaled-down pod told deleted")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()  # leave nothing running; the test fails all the same
            proc.wait(10)
            raise
        reader.join(10)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    states = [d["state"] for d in seen if d["kind"] == "timeline"]
    assert "engine_init" in states or "container_start" in states  # seen on the way, live
    final = {d["pod"]: d for d in seen if d["kind"] == "timeline" and d["state"] != "deleted"}
    assert len(final) == 2
    for t in final.values():
        for phase, want in EXPECTED.items():
            assert t["phases"][phase] == pytest.approx(want, abs=TOLERANCE_S), (phase, t)
