"""What the live tests do to the real cluster: apply deploy/, run serve, play workflow steps."""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.support import render, tool

REPO = Path(__file__).resolve().parents[2]
NS = "llm-inference"
WARMUP = ("kube-system", "gpu-warmup")
T = TypeVar("T")

# Short budgets so a stuck pod is found in seconds; the stage delays sit well inside them.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm-inference]
  budgets: {scheduling: 4, image_pull: 60, container_start: 30, engine_init: 10}
  checks: 1
  check_interval_s: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
image_update:
  enabled: true
  selector: app=vllm-inference
  warmup_namespace: kube-system
  warmup_daemonset: gpu-warmup
  rollout_timeout_s: 120
guardrails:
  cooldown: {seconds: 60}
  blast_radius: {max_pods: 2, max_percent: 100, window_s: 600, max_pods_cluster: 5}
"""


def policy(drop: Iterable[str] = (), **changes: dict[str, Any]) -> str:
    """POLICY with `changes` merged into its sections (a mapping merges into the one it meets,
    anything else replaces it) and the sections in `drop` left out: a test's own policy says
    only how it differs from the suite's."""
    doc = yaml.safe_load(POLICY)
    for section in drop:
        del doc[section]
    for section, change in changes.items():
        doc[section] = _merged(doc.get(section, {}), change)
    return str(yaml.safe_dump(doc, sort_keys=False))


def _merged(base: Any, change: Any) -> Any:
    if not (isinstance(base, dict) and isinstance(change, dict)):
        return change
    return {**base, **{k: _merged(base.get(k), v) for k, v in change.items()}}


# What of deploy/ the cluster gets: identities, their RBAC, the Lease, the warmup DaemonSet.
# The remediator Deployment itself is not applied: serve runs here as a local process.
_APPLIED_KINDS = {
    "Namespace", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
    "Lease", "Secret", "PriorityClass", "DaemonSet", "ConfigMap",
}  # fmt: skip


def wait_for(
    check: Callable[[], T | None],
    timeout: float = 60.0,
    what: str = "",
    story: Callable[[], str] | None = None,
) -> T:
    """Poll until `check` returns something truthy; fail, never hang. Timed out, the failure
    says what `story` finds then (where things were: a live test's failure says why)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    found = f"; {story()}" if story is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or check}{found}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveCluster:
    """The running control plane, with the calls the tests make as cluster-admin."""

    raw: Any  # tests/cluster/cluster.py's Cluster (imported by path, so typed loosely)

    @property
    def kubeconfig(self) -> Path:
        return Path(self.raw.kubeconfig)

    def api(self, method: str, path: str, body: Any = None, ctype: str = "") -> Any:
        return self.raw.api(method, path, body, ctype=ctype)

    def apply(self, docs: Iterable[dict[str, Any]]) -> None:
        self.raw.apply(docs)

    def sa_kubeconfig(self, namespace: str, name: str) -> Path:
        return Path(self.raw.serviceaccount_kubeconfig(namespace, name))

    def pods(self, namespace: str = NS, selector: str = "") -> list[dict[str, Any]]:
        q = f"?labelSelector={urllib.request.quote(selector)}" if selector else ""
        return list(self.api("GET", f"/api/v1/namespaces/{namespace}/pods{q}")["items"])

    def events(self, namespace: str = NS) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/api/v1/namespaces/{namespace}/events")["items"])

    def get(self, path: str) -> dict[str, Any] | None:
        try:
            return dict(self.api("GET", path))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def delete(self, path: str) -> None:
        try:
            self.api("DELETE", path)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        return subprocess.run(
            [tool("kubectl"), *args], env=env, capture_output=True, text=True, check=True
        )


def deployment(cluster: LiveCluster, name: str, namespace: str = NS) -> dict[str, Any]:
    """The Deployment as the API server has it now (it must exist)."""
    found = cluster.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    assert found is not None, f"no Deployment {namespace}/{name}"
    return found


def deployment_story(cluster: LiveCluster, name: str, namespace: str = NS) -> str:
    """Where a Deployment and its pods are, for a live test's failure to say why: its
    replicas and annotations (the hedge notes name pods by uid), and each pod's name, uid,
    node and phase."""
    dep = deployment(cluster, name, namespace)
    pods = [
        (p["metadata"]["name"], p["metadata"]["uid"], p["spec"].get("nodeName"),
         p["status"].get("phase"))
        for p in cluster.pods(namespace, f"app.kubernetes.io/name={name}")
    ]  # fmt: skip
    notes = dep["metadata"].get("annotations")
    return f"replicas {dep['spec']['replicas']}, annotations {notes}, pods {pods}"


def install_deploy(live: LiveCluster) -> None:
    """deploy/'s production overlay and the warmup DaemonSet, applied to the real API server,
    plus what the example Deployment expects to exist (its namespace and weights PVC)."""
    docs = [
        *render(REPO / "deploy" / "overlays" / "production"),
        *render(REPO / "deploy" / "gpu-warmup"),
    ]
    namespaces = {d["metadata"].get("namespace") for d in docs} - {None, "kube-system", "default"}
    live.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces
    )
    ordered = sorted(
        (d for d in docs if d["kind"] in _APPLIED_KINDS),
        key=lambda d: (d["kind"] != "Namespace", d["kind"] != "PriorityClass"),
    )
    live.apply(ordered)
    live.apply(example_storage())


def example_storage() -> list[dict[str, Any]]:
    """The example mounts PVC llm-model-cache (weights); a pre-bound PV lets it schedule."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "llm-model-cache"},
        "spec": {
            "capacity": {"storage": "1Ti"},
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "hostPath": {"path": "/models"},
            "claimRef": {"namespace": NS, "name": "llm-model-cache"},
        },
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "llm-model-cache", "namespace": NS},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": "",
            "volumeName": "llm-model-cache",
            "resources": {"requests": {"storage": "1Ti"}},
        },
    }
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    return [ns, pv, pvc]


def example_deployment(
    name: str = "vllm-llama-70b",
    replicas: int = 2,
    shape: dict[str, str] | None = None,
    gpus: int = 2,
) -> dict[str, Any]:
    """deploy/examples' vLLM Deployment, renamed, with each pod's cold-start shape set by
    the kwok stage annotations (tests/cluster/stages/vllm-cold-start.yaml)."""
    # A copy: render() is cached, and tests/deploy reads the same objects after us.
    example = render(REPO / "deploy/examples/vllm-inference")
    doc = copy.deepcopy(next(d for d in example if d["kind"] == "Deployment"))
    doc["metadata"]["name"] = name
    sel = {"app": "vllm-inference", "app.kubernetes.io/name": name}
    doc["spec"]["selector"]["matchLabels"] = sel
    tmpl = doc["spec"]["template"]
    tmpl["metadata"]["labels"] = dict(sel)
    tmpl["metadata"]["annotations"] = {
        f"cold-start.remediator.dev/{k}": v for k, v in (shape or {}).items()
    }
    doc["spec"]["replicas"] = replicas
    vllm = next(c for c in tmpl["spec"]["containers"] if c["name"] == "vllm")
    vllm["resources"]["requests"]["nvidia.com/gpu"] = str(gpus)
    vllm["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)
    return dict(doc)


# -- serve -----------------------------------------------------------------------------------


@dataclass
class Serve:
    """`remediator serve` as a local process, as the Deployment runs it (POD_NAME set)."""

    live: LiveCluster
    workdir: Path
    policy: str
    argo_url: str
    argo_token: str
    identity: str = "remediator-0"
    webhook_token: str = "live-webhook-token-3c1d"
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    kubeconfig: Path | None = None  # None: the ServiceAccount's, straight to the API server

    def start(self) -> Serve:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        policy = self.workdir / "policy.yaml"
        policy.write_text(self.policy)
        kubeconfig = self.kubeconfig or self.live.sa_kubeconfig("remediator", "remediator")
        env = {
            **os.environ,
            "POD_NAME": self.identity,
            "POD_NAMESPACE": "remediator",
            "ARGO_TOKEN": self.argo_token,
            "REMEDIATOR_WEBHOOK_TOKEN": self.webhook_token,
            "REMEDIATOR_LOG_LEVEL": "INFO",
            # A short Lease so a takeover after SIGKILL happens within a test.
            "REMEDIATOR_LEASE_DURATION": "4",
            "REMEDIATOR_RENEW_DEADLINE": "3",
            "REMEDIATOR_RETRY_PERIOD": "0.5",
            # One ConfigMap is shared by every serve of the session's cluster: a test that
            # shares the learned history turns it on and clears it (test_shared_state.py).
            "REMEDIATOR_NO_SHARED_STATE": "true",
            **self.extra_env,
        }
        args = [
            "--policy", str(policy), "--listen", f"127.0.0.1:{self.port}",
            "--state-db", str(self.workdir / "state.db"), "--namespaces", NS,
            "--warmup-daemonset", "/".join(WARMUP), "--kubeconfig", str(kubeconfig),
            "--argo-server", self.argo_url, "--argo-namespace", "argo",
        ]  # fmt: skip
        log = (self.workdir / f"{self.identity}.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "remediator.serve", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self.healthy, 60, f"serve {self.identity} /healthz")
        return self

    def healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"serve exited {self.proc.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def sample(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.metrics().items() if n == name and want <= set(ls))

    def log_tail(self, lines: int = 40) -> str:
        path = self.workdir / f"{self.identity}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def log_lines(self) -> Iterator[dict[str, Any]]:
        path = self.workdir / f"{self.identity}.log"
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    yield json.loads(line)
                except ValueError:
                    continue

    def post(self, path: str, body: bytes, ctype: str = "application/json") -> int:
        """POST to serve with its webhook token, as a sender would; the answer's status."""
        headers = {"Authorization": f"Bearer {self.webhook_token}", "Content-Type": ctype}
        url = f"http://127.0.0.1:{self.port}{path}"
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return int(r.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


# -- engine logs -----------------------------------------------------------------------------
# kwok plays the kubelet but serves no container logs (pods/log is the API server's 500), so
# serve's follower has nothing to read here. A pod's engine log reaches serve as a log
# shipper sends it (README: EngineLog documents on /events): each line when the engine
# would write it, stamped with the time it was written, on this machine's clock (kwok's).


def container_started(cluster: LiveCluster, name: str, container: str = "vllm") -> float | None:
    """When the pod's engine container started (kwok's stamp), once it has."""
    pod = cluster.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        started = (status.get("state") or {}).get("running", {}).get("startedAt")
        if status.get("name") == container and started:
            return datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
    return None


@dataclass
class EngineLog:
    """Ships one pod's engine log to serve from a thread: `lines` are (seconds after the
    container started, the line); the log stops after the last (a hung engine's does)."""

    live: LiveCluster
    serve: Serve
    pod: dict[str, Any]
    lines: list[tuple[float, str]]
    posted: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def start(self) -> EngineLog:
        threading.Thread(target=self._run, name=f"log-{self.name}", daemon=True).start()
        return self

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    def _run(self) -> None:
        try:
            started = wait_for(lambda: container_started(self.live, self.name), 60,
                               f"{self.name} started")  # fmt: skip
            for offset, line in self.lines:  # each stamped when written, shipped just after
                time.sleep(max(0.0, started + offset - time.time()))
                self._post(started + offset, line)
        except Exception as exc:  # reported by done(), in the test's thread
            self.errors.append(repr(exc))

    def _post(self, at: float, line: str) -> None:
        stamp = datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")
        doc = {"kind": "EngineLog", "namespace": NS, "pod": self.name,
               "uid": self.pod["metadata"]["uid"], "time": stamp, "line": line}  # fmt: skip
        status = self.serve.post("/events", json.dumps(doc).encode())
        if status != 202:
            raise AssertionError(f"/events answered {status} for {line!r}")
        self.posted.append((at, line))

    def done(self) -> bool:
        if self.errors:
            raise AssertionError(f"shipping {self.name}'s log failed: {self.errors}")
        return len(self.posted) == len(self.lines)


# -- workflow steps --------------------------------------------------------------------------


def step_commands(workflow: dict[str, Any]) -> list[tuple[list[str], dict[str, str]]]:
    """The `remediator step ...` command lines the workflow's first step group would run, with
    parameters substituted (the stand-in stores the substituted template spec). The GPU memory
    verification is left out: it needs nvidia-smi on a real GPU node."""
    spec = workflow["status"]["storedWorkflowTemplateSpec"]
    templates = {t["name"]: t for t in spec["templates"]}
    params = {p["name"]: p["value"] for p in spec["arguments"]["parameters"]}
    entry = templates[spec["entrypoint"]]
    names: list[str] = []
    if "container" in entry:
        names = [entry["name"]]
    else:
        for step in entry.get("steps", [[]])[0]:
            cond = step.get("when", "")
            if cond and not _when(cond):
                continue
            if "template" in step:
                names.append(step["template"])
    out = []
    for name in names:
        c = templates[name]["container"]
        env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
        assert c["command"] == ["remediator"], c["command"]
        out.append(([*c["command"][1:], *c["args"]], env))
    assert params  # parameters were substituted into the stored spec
    return out


def _when(expr: str) -> bool:
    """Argo's `when` for the two forms our templates use: 'X' != '' and 'X' == ''."""
    left, op, _ = expr.partition(" != ") if " != " in expr else expr.partition(" == ")
    empty = left.strip().strip("'") == ""
    return not empty if op.strip() == "!=" else empty


def run_step(
    live: LiveCluster, argv: list[str], env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a step as its pod would: the workflow ServiceAccount's token, the step's env."""
    kubeconfig = live.sa_kubeconfig("argo", "remediator-workflow")
    full_env = {**os.environ, **env, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "remediator", *argv],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False)


# -- recording -------------------------------------------------------------------------------


@dataclass
class Recorder:
    """What an SRE records for replay: `kubectl get pods -w -o json --output-watch-events` and the
    same for events (kubectl watches one resource type at a time), each pretty-printed JSON
    document turned into one line, the two streams merged in the order they arrived."""

    live: LiveCluster
    path: Path
    namespace: str = NS
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> Recorder:
        env = {**os.environ, "KUBECONFIG": str(self.live.kubeconfig)}
        for kind in ("pods", "events"):
            argv = [tool("kubectl"), "get", kind, "-n", self.namespace, "-w", "-o", "json",
                    "--output-watch-events"]  # fmt: skip
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
            thread.start()
            self.procs.append(proc)
            self.threads.append(thread)
        return self

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        buf = ""
        decoder = json.JSONDecoder()
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):  # type: ignore[union-attr]
            buf += chunk.decode()
            while True:
                stripped = buf.lstrip()
                try:
                    doc, end = decoder.raw_decode(stripped)
                except ValueError:
                    break
                buf = stripped[end:]
                with self.lock:
                    self.lines.append(json.dumps(doc, separators=(",", ":")))

    def wait_until(self, check: Callable[[list[Any]], object], timeout: float, what: str) -> None:
        """Until the watch events recorded so far (`{"type", "object"}`) satisfy `check`. A
        test that waited on the cluster (a GET) must wait here too before it stops
        recording: the watch brings the same change a moment later, and kubectl stopped
        first loses it."""

        def recorded() -> bool:
            with self.lock:
                docs = [json.loads(line) for line in self.lines]
            return bool(check(docs))

        wait_for(recorded, timeout, what)

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(30)
        for thread in self.threads:
            thread.join(10)
        with self.lock:
            self.path.write_text("".join(line + "\n" for line in self.lines))


def json_documents(text: str) -> Iterator[Any]:
    """Concatenated (pretty-printed) JSON documents, one by one."""
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i == n:
            return
        doc, i = decoder.raw_decode(text, i)
        yield doc


def replay(path: Path, policy: str, workdir: Path) -> list[dict[str, Any]]:
    """`remediator replay -o json --policy` over a recording: every line it prints."""
    pol = workdir / "replay-policy.yaml"
    pol.write_text(policy)
    argv = ["replay", "-o", "json", "--policy", str(pol), str(path)]
    out = subprocess.run(
        [sys.executable, "-m", "remediator", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
