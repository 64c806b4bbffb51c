"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok (which plays the kubelet for fake GPU nodes).

Stdlib only (plus the openssl CLI), so `scripts/cluster` runs before any venv exists. The binaries
come from `tests/cluster/build` (pinned in versions.env); everything this module starts is recorded
by PID in the state folder and stopped by that PID, never by name.

    c = Cluster(Path(".cluster"))
    c.up(nodes=4)            # ready when nodes are Ready and the default ServiceAccount exists
    c.kubeconfig             # admin kubeconfig (system:masters)
    c.serviceaccount_kubeconfig("remediator", "remediator")   # a token kubeconfig for an SA
    c.restart("kube-apiserver")
    c.down()
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procs import ClusterError, Supervised

__all__ = ["Cluster", "ClusterError", "bin_dir", "free_port", "versions"]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STAGES = HERE / "stages"
GPU_NODE_LABELS = {
    "type": "kwok",
    "node.kubernetes.io/instance-type": "p5.48xlarge",
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
}
ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def bin_dir() -> Path:
    v = versions()
    root = Path(
        os.environ.get("REMEDIATOR_CLUSTER_CACHE", Path.home() / ".cache/remediator-cluster")
    )
    key = f"k8s-{v['KUBERNETES_VERSION']}-etcd-{v['ETCD_VERSION']}-kwok-{v['KWOK_VERSION']}"
    return root / key / "bin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _genkey(name: str, cwd: Path) -> None:
    """An ECDSA P-256 key: as good as RSA here and many times faster to make on a busy machine."""
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", name, cwd=cwd
    )


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@dataclass
class Cluster(Supervised):
    """One control plane whose files (certificates, etcd data, logs, PIDs) live under `home`."""

    home: Path
    nodes: int = 4
    state: dict[str, Any] = field(default_factory=dict)

    COMPONENTS = ORDER

    def __post_init__(self) -> None:
        self.home = self.home.resolve()
        self._load()

    # -- paths -------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    @property
    def pki(self) -> Path:
        return self.home / "pki"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.home / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.state['ports']['apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.state['ports']['etcd']}"

    # -- lifecycle ---------------------------------------------------------------------------
    def up(self, nodes: int | None = None, timeout: float = 90.0) -> None:
        if nodes is not None:
            self.nodes = nodes
        binaries = bin_dir()
        missing = [b for b in ORDER if not (binaries / b).exists()]
        if missing:
            raise ClusterError(
                f"missing {', '.join(missing)} in {binaries}: run tests/cluster/build first"
            )
        ports = {k: free_port() for k in ("etcd", "etcd_peer", "apiserver", "kwok")}
        state = {"ports": ports, "pids": {}, "nodes": self.nodes, "bin": str(binaries)}
        self._bring_up(state, lambda: self._start_all(timeout))

    def _start_all(self, timeout: float) -> None:
        shutil.rmtree(self.home / "etcd", ignore_errors=True)  # every `up` is a fresh cluster
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        self._pki()
        self._kubeconfigs()
        self._kwok_config()
        self._start("etcd")
        self._wait(lambda: self._http_ok(f"{self.etcd_url}/health"), timeout, "etcd health")
        self._start("kube-apiserver")
        self._wait(self._apiserver_ready, timeout, "kube-apiserver /readyz")
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            self._start(name)
        self._create_nodes(self.nodes)
        self._wait(lambda: self._ready_nodes() >= self.nodes, timeout, "nodes Ready")
        self._wait(self._default_sa, timeout, "the default ServiceAccount")

    def restart(self, name: str, timeout: float = 60.0) -> None:
        self.stop(name)
        self._start(name)
        if name == "kube-apiserver":
            self._wait(self._apiserver_ready, timeout, "kube-apiserver /readyz")
        self._save()

    def status(self) -> dict[str, Any]:
        comps = self.procs.states()
        return {
            "home": str(self.home),
            # (`procs` above leaves {"pids": {}} in an empty state: ask for the ports.)
            "server": self.server if "ports" in self.state else None,
            "kubeconfig": str(self.kubeconfig),
            "components": comps,
            "nodes_ready": self._ready_nodes() if comps.get("kube-apiserver") == "running" else 0,
        }

    # -- API ---------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Any = None, *, ctype: str = "") -> Any:
        """One call as cluster-admin. Raises urllib.error.HTTPError on a non-2xx answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Content-Type", ctype or "application/json")
        with urllib.request.urlopen(req, context=self._admin_tls(), timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def apply(self, docs: Iterable[dict[str, Any]]) -> None:
        """Server-side apply of manifests as cluster-admin (field manager: remediator-tests)."""
        for doc in docs:
            path = resource_path(doc)
            self.api(
                "PATCH",
                f"{path}?fieldManager=remediator-tests&force=true",
                doc,
                ctype="application/apply-patch+yaml",
            )

    def token(self, namespace: str, name: str, seconds: int = 3600, wait_s: float = 30.0) -> str:
        """A bound token of the ServiceAccount. A namespace's `default` ServiceAccount is made
        by the controller manager a moment after the namespace (a CI run asked in between and
        got 404): a 404 is asked again for up to `wait_s`, then raised."""
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}
        body["spec"] = {"expirationSeconds": seconds}  # type: ignore[assignment]
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        deadline = time.monotonic() + wait_s
        while True:
            try:
                out = self.api("POST", path, body)
                return str(out["status"]["token"])
            except urllib.error.HTTPError as exc:
                if exc.code != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def serviceaccount_kubeconfig(
        self, namespace: str, name: str, path: Path | None = None
    ) -> Path:
        """A kubeconfig that authenticates as the ServiceAccount (a bound token)."""
        path = path or self.home / f"sa-{namespace}-{name}.kubeconfig"
        user = {"token": self.token(namespace, name)}
        self._write_kubeconfig(path, f"system:serviceaccount:{namespace}:{name}", user)
        return path

    # -- internals ---------------------------------------------------------------------------
    def _pki(self) -> None:
        p = self.pki
        if (p / "ca.crt").exists():
            return
        p.mkdir(parents=True, exist_ok=True)
        _genkey("ca.key", p)
        _openssl(
            "req", "-x509", "-new", "-key", "ca.key", "-days", "365", "-subj",
            "/CN=remediator-test-ca", "-out", "ca.crt", cwd=p,
        )  # fmt: skip
        sans = (
            "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,IP:10.96.0.1"
        )
        self._cert("apiserver", "/CN=kube-apiserver", sans)
        self._cert("admin", "/O=system:masters/CN=remediator-admin")
        self._cert("controller-manager", "/CN=system:kube-controller-manager")
        self._cert("scheduler", "/CN=system:kube-scheduler")
        self._cert("kwok", "/O=system:masters/CN=kwok-controller")
        _genkey("sa.key", p)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=p)

    def _cert(self, name: str, subject: str, sans: str = "") -> None:
        p = self.pki
        _genkey(f"{name}.key", p)
        _openssl(
            "req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=p
        )
        ext = ["-extfile", f"{name}.ext"] if sans else []
        if sans:
            (p / f"{name}.ext").write_text(sans + "\n")
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "365", "-out", f"{name}.crt", *ext, cwd=p,
        )  # fmt: skip

    def _write_kubeconfig(self, path: Path, user: str, creds: dict[str, str]) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "remediator-test",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": _b64(self.pki / "ca.crt"),
                    },
                }
            ],
            "users": [{"name": user, "user": creds}],
            "contexts": [
                {"name": "remediator-test", "context": {"cluster": "remediator-test", "user": user}}
            ],
            "current-context": "remediator-test",
        }
        path.write_text(json.dumps(cfg, indent=2))
        path.chmod(0o600)

    def _cert_kubeconfig(self, name: str) -> Path:
        path = self.home / f"{name}.kubeconfig"
        creds = {
            "client-certificate-data": _b64(self.pki / f"{name}.crt"),
            "client-key-data": _b64(self.pki / f"{name}.key"),
        }
        self._write_kubeconfig(path, name, creds)
        return path

    def _kubeconfigs(self) -> None:
        for name in ("controller-manager", "scheduler", "kwok"):
            self._cert_kubeconfig(name)
        self._cert_kubeconfig("admin").replace(self.kubeconfig)

    def _kwok_config(self) -> None:
        """kwok needs every Stage it plays: the node stages shipped in kwok's own module (copied
        into the binary cache by the build) and the pod stages of this repo."""
        upstream = bin_dir().parent / "stages"
        files = sorted(upstream.glob("*.yaml")) + sorted(STAGES.glob("*.yaml"))
        if not files:
            raise ClusterError(f"no kwok stages in {upstream} or {STAGES}: run tests/cluster/build")
        text = "\n---\n".join(f.read_text().strip() for f in files)
        (self.home / "kwok.yaml").write_text(text + "\n")

    def _args(self, name: str) -> list[str]:
        p, ports, home = self.pki, self.state["ports"], self.home
        if name == "etcd":
            peer = f"http://127.0.0.1:{ports['etcd_peer']}"
            return [
                "--name=default", f"--data-dir={home / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}", "--log-level=warn",
                # A throwaway test store: durability across power loss is not what we test.
                "--unsafe-no-fsync",
            ]  # fmt: skip
        if name == "kube-apiserver":
            return [
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=Node,RBAC", "--allow-privileged=true",
                # The kubernetes Service would point at a loopback address, which Endpoints refuse.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
            ]  # fmt: skip
        if name == "kube-controller-manager":
            return [
                f"--kubeconfig={home / 'controller-manager.kubeconfig'}",
                "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={p / 'sa.key'}",
                f"--root-ca-file={p / 'ca.crt'}",
                "--cluster-name=remediator-test",
                # Faster than the default 20/30 so 2,000-pod churn is not throttled client-side.
                "--kube-api-qps=200", "--kube-api-burst=400",
            ]  # fmt: skip
        if name == "kube-scheduler":
            return [
                f"--kubeconfig={home / 'scheduler.kubeconfig'}",
                "--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
            ]  # fmt: skip
        if name == "kwok":
            return [
                f"--kubeconfig={home / 'kwok.kubeconfig'}",
                f"--config={home / 'kwok.yaml'}",
                "--manage-nodes-with-label-selector=type=kwok",
                f"--server-address=127.0.0.1:{ports['kwok']}",
                "--node-lease-duration-seconds=40",
            ]
        raise ClusterError(f"unknown component {name}")

    def _start(self, name: str) -> None:
        self.procs.start(name, self._args(name), cwd=self.home)

    def _admin_tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    @staticmethod
    def _http_ok(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _apiserver_ready(self) -> bool:
        try:
            req = urllib.request.Request(self.server + "/readyz")
            with urllib.request.urlopen(req, context=self._admin_tls(), timeout=2) as resp:
                return bool(resp.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def _create_nodes(self, count: int) -> None:
        for i in range(count):
            self.api("POST", "/api/v1/nodes", gpu_node(i))

    def _ready_nodes(self) -> int:
        try:
            items = self.api("GET", "/api/v1/nodes?labelSelector=type%3Dkwok")["items"]
        except (OSError, urllib.error.URLError):
            return 0
        return sum(
            1
            for n in items
            for c in n.get("status", {}).get("conditions", [])
            if c["type"] == "Ready" and c["status"] == "True"
        )

    def _default_sa(self) -> bool:
        try:
            self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default")
            return True
        except urllib.error.HTTPError:
            return False


def gpu_node(index: int, gpus: int = 8) -> dict[str, Any]:
    """A fake node labelled and sized like a real 8-GPU node (what the NVIDIA device plugin and
    GPU feature discovery would publish), with its own address and pod CIDR."""
    name = f"gpu-node-{index:03d}"
    hi, lo = divmod(index, 250)
    capacity = {"cpu": "192", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {**GPU_NODE_LABELS, "kubernetes.io/hostname": name},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"10.{100 + hi}.{lo}.0/24"},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),  # its own: a test may change one of the two
            "addresses": [
                {"type": "InternalIP", "address": f"10.64.{hi}.{lo + 1}"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


_PLURAL = {"PriorityClass": "priorityclasses", "Ingress": "ingresses"}


def resource_path(doc: dict[str, Any]) -> str:
    """The REST path of a manifest's object (only the kinds our manifests use)."""
    kind, meta = doc["kind"], doc["metadata"]
    api = doc["apiVersion"]
    prefix = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    plural = _PLURAL.get(kind, kind.lower() + "s")
    cluster_scoped = kind in {
        "Namespace", "Node", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
        "CustomResourceDefinition", "PersistentVolume", "StorageClass",
    }  # fmt: skip
    ns = "" if cluster_scoped else f"/namespaces/{meta.get('namespace', 'default')}"
    return f"{prefix}{ns}/{plural}/{meta['name']}"
