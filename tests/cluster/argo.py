"""Real Argo Workflows on the loopback control plane: workflow-controller and `argo server` run as
local processes against the cluster, namespaced to `argo`, leader election off.

Stdlib only, like cluster.py. The binaries, CRDs and upstream RBAC come from
tests/cluster/build-argo (pinned in versions.env). What this module installs, all in `argo`:
the CRDs (upstream's minimal set, as its namespace-install uses), ServiceAccounts `argo` and
`argo-server` with upstream's Roles, and the controller ConfigMap (templateReferencing: Secure,
as docs/deploy.md asks). Each process runs with its own ServiceAccount's token, so upstream's
RBAC is what it may do. PIDs, ports and logs live beside the cluster's (`argo.json`, logs/).

    a = Argo(cluster)
    a.up()                      # CRDs, RBAC, ConfigMap, controller, server; ready when both answer
    a.server_url                # http://127.0.0.1:PORT (auth mode client: a Kubernetes token)
    a.install_templates()       # workflows/*.yaml as WorkflowTemplates in `argo`
    a.down()
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster import Cluster, ClusterError, bin_dir, free_port, versions
from procs import Supervised

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NAMESPACE = "argo"
CONFIGMAP = "workflow-controller-configmap"
COMPONENTS = ("workflow-controller", "argo-server")
HEALTHZ = "http://127.0.0.1:6060/healthz"  # fixed by upstream; the build binds it to loopback
# Step pods wait for the test harness (tests/live/argo) to run their command line, then end with
# its exit code: the kwok Stage tests/cluster/stages/argo-step.yaml reads these annotations.
HOLD_ANNOTATION = "argo-step.remediator.dev/hang"


def manifests_dir() -> Path:
    return bin_dir().parent / f"argo-workflows-{versions()['ARGO_WORKFLOWS_VERSION']}"


def yaml_documents(text: str) -> Iterator[tuple[dict[str, str], str]]:
    """Split a manifest file into documents, each with the identity needed to apply it
    (apiVersion, kind, name, namespace), read off its top-level lines; the API server parses
    the YAML itself (stdlib has no YAML parser)."""
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        if not re.search(r"^kind:", doc, flags=re.M):
            continue
        meta = {k: _top(doc, k) for k in ("apiVersion", "kind")}
        block = re.search(r"^metadata:\n((?:[ \t]+.*\n?|\s*\n)*)", doc, flags=re.M)
        lines = block.group(1) if block else ""
        for key in ("name", "namespace"):
            m = re.search(rf"^  {key}:\s*['\"]?([^'\"\s#]+)", lines, flags=re.M)
            if m:
                meta[key] = m.group(1)
        yield meta, doc


def _top(doc: str, key: str) -> str:
    m = re.search(rf"^{key}:\s*['\"]?([^'\"\s#]+)", doc, flags=re.M)
    if not m:
        raise ClusterError(f"manifest without {key}:\n{doc[:200]}")
    return m.group(1)


def controller_config(metrics_port: int, hold_steps: bool) -> dict[str, str]:
    """The controller ConfigMap's data. Metrics stay on (loopback, a free port)."""
    data = {
        "workflowRestrictions": "templateReferencing: Secure\n",
        "metricsConfig": f"enabled: true\nport: {metrics_port}\nsecure: false\n",
    }
    if hold_steps:
        data["workflowDefaults"] = json.dumps(
            {"spec": {"podMetadata": {"annotations": {HOLD_ANNOTATION: "true"}}}}
        )
    return data


@dataclass
class Argo(Supervised):
    cluster: Cluster
    state: dict[str, Any] = field(default_factory=dict)

    COMPONENTS = COMPONENTS

    def __post_init__(self) -> None:
        self._load()

    @property
    def state_file(self) -> Path:
        return self.cluster.home / "argo.json"

    @property
    def logs(self) -> Path:
        return self.cluster.logs

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.state['ports']['argo-server']}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.state['ports']['metrics']}/metrics"

    # -- lifecycle ---------------------------------------------------------------------------
    def up(self, *, hold_steps: bool = False, timeout: float = 90.0) -> None:
        """Install and start. `hold_steps`: every step pod waits for the harness (see above)."""
        exe = bin_dir()
        missing = [c for c in ("workflow-controller", "argo") if not (exe / c).exists()]
        if missing or not manifests_dir().is_dir():
            raise ClusterError(
                f"missing {missing or manifests_dir()}: run tests/cluster/build-argo"
            )
        ports = {"argo-server": free_port(), "metrics": free_port()}
        state = {"ports": ports, "pids": {}, "bin": str(exe)}
        self._bring_up(state, lambda: self._start_all(hold_steps, timeout))

    def _start_all(self, hold_steps: bool, timeout: float) -> None:
        self.install(hold_steps)
        self._start("workflow-controller")
        self._wait(lambda: _http_ok(HEALTHZ), timeout, "workflow-controller /healthz")
        self._start("argo-server")
        # Up when an authenticated call is served (503 Unavailable until its caches sync), by
        # each service the tests call: the server's HTTP gateway dials each gRPC service on its
        # own connection, so one answering says nothing of the next (a submit got 503 for the
        # 10 ms after the templates' list answered, the whole of a virtual-clock test's retries).
        token = self.cluster.token(NAMESPACE, "argo-server", seconds=600)
        for path in (f"workflow-templates/{NAMESPACE}", f"workflows/{NAMESPACE}"):
            url = f"{self.server_url}/api/v1/{path}?listOptions.limit=1"
            self._wait(lambda u=url: _answers(u, token), timeout, f"argo server ({path})")

    def start_controller(self, timeout: float = 90.0) -> None:
        """Start the workflow-controller again after `stop("workflow-controller")`: a test
        that needs the server to take workflows nothing runs (they stay Pending)."""
        self._start("workflow-controller")
        self._wait(lambda: _http_ok(HEALTHZ), timeout, "workflow-controller /healthz")

    def status(self) -> dict[str, Any]:
        return {
            "server": self.server_url if "ports" in self.state else None,
            "components": self.procs.states(),
        }

    # -- install -----------------------------------------------------------------------------
    def install(self, hold_steps: bool = False) -> None:
        c = self.cluster
        c.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        crds = sorted((manifests_dir() / "crds").glob("argoproj.io_*.yaml"))
        for path in crds:
            self.apply_yaml(path.read_text())
        for path in crds:
            name = next(yaml_documents(path.read_text()))[0]["name"]
            self._wait(lambda n=name: self._established(n), 60, f"CRD {name} Established")
        ns_install = manifests_dir() / "namespace-install"
        for sub in ("workflow-controller-rbac", "argo-server-rbac"):
            for path in sorted((ns_install / sub).glob("*.yaml")):
                if path.name != "kustomization.yaml":
                    self.apply_yaml(path.read_text(), namespace=NAMESPACE)
        for sa in ("argo", "argo-server"):
            c.apply([_doc("v1", "ServiceAccount", sa)])
        cm = _doc("v1", "ConfigMap", CONFIGMAP)
        cm["data"] = controller_config(self.state["ports"]["metrics"], hold_steps)
        c.apply([cm])  # server-side apply: fields left out (workflowDefaults) are removed

    def install_templates(self, directory: Path = REPO / "workflows") -> list[str]:
        names = []
        for path in sorted(directory.glob("*.yaml")):
            for meta, _ in yaml_documents(path.read_text()):
                names.append(meta["name"])
            self.apply_yaml(path.read_text(), namespace=NAMESPACE)
        return names

    def apply_yaml(self, text: str, namespace: str | None = None) -> None:
        """Server-side apply of each YAML document, as cluster-admin."""
        for meta, doc in yaml_documents(text):
            if namespace and "namespace" not in meta and meta["kind"] not in _CLUSTER_SCOPED:
                meta["namespace"] = namespace
            path = _path(meta) + "?fieldManager=remediator-tests&force=true"
            self._send("PATCH", path, doc.encode(), "application/apply-patch+yaml")

    # -- internals ---------------------------------------------------------------------------
    def _send(self, method: str, path: str, data: bytes, ctype: str) -> Any:
        req = urllib.request.Request(self.cluster.server + path, data=data, method=method)
        req.add_header("Content-Type", ctype)
        with urllib.request.urlopen(req, context=self._tls(), timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def _tls(self) -> ssl.SSLContext:
        pki = self.cluster.pki
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return ctx

    def _established(self, crd: str) -> bool:
        got = self.cluster.api(
            "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"
        )
        conds = got.get("status", {}).get("conditions", [])
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    def _args(self, name: str) -> list[str]:
        sa = "argo" if name == "workflow-controller" else "argo-server"
        kubeconfig = self._sa_kubeconfig(sa)
        common = [f"--kubeconfig={kubeconfig}", f"--namespace={NAMESPACE}", "--namespaced",
                  f"--managed-namespace={NAMESPACE}", f"--configmap={CONFIGMAP}",
                  "--log-format=json"]  # fmt: skip
        if name == "workflow-controller":
            return common
        port = self.state["ports"]["argo-server"]
        return ["server", *common, "--auth-mode=client", "--secure=false", f"--port={port}"]

    def _sa_kubeconfig(self, sa: str) -> Path:
        """A day-long token of the ServiceAccount (a demo cluster outlives an hour's token)."""
        token = self.cluster.token(NAMESPACE, sa, seconds=86400)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": self.cluster.server,
                "certificate-authority": str(self.cluster.pki / "ca.crt")}}],
            "users": [{"name": sa, "user": {"token": token}}],
            "contexts": [{"name": sa, "context": {"cluster": "local", "user": sa,
                                                  "namespace": NAMESPACE}}],
            "current-context": sa,
        }  # fmt: skip
        path = self.cluster.home / f"argo-{sa}.kubeconfig"
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def _exe(self, name: str) -> Path:
        return Path(self.state["bin"]) / ("argo" if name == "argo-server" else name)

    def _start(self, name: str) -> None:
        args = self._args(name)
        # In auth mode client the server builds each caller's REST config from the default
        # loading rules ($KUBECONFIG), not from --kubeconfig: it only swaps in the caller's token.
        kubeconfig = next(a.split("=", 1)[1] for a in args if a.startswith("--kubeconfig="))
        env = {**os.environ, "LEADER_ELECTION_DISABLE": "true", "KUBECONFIG": kubeconfig}
        self.procs.start(name, args, cwd=self.cluster.home, env=env)


_CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}


def _doc(api: str, kind: str, name: str) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}}


def _path(doc: dict[str, Any]) -> str:
    """REST path of a manifest (given as a doc, or as the identity yaml_documents reads)."""
    meta = doc.get("metadata", doc)
    api, kind = doc["apiVersion"], doc["kind"]
    base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    plural = kind.lower() + "s" if not kind.endswith("y") else kind.lower()[:-1] + "ies"
    ns = "" if kind in _CLUSTER_SCOPED else f"/namespaces/{meta.get('namespace', 'default')}"
    return f"{base}{ns}/{plural}/{meta['name']}"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _answers(url: str, token: str) -> bool:
    """The server answers a call (any status below 500: RBAC may still say no)."""
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=2):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, urllib.error.URLError):
        return False
