"""The Helm chart on the real control plane (tests/cluster), installed by the pinned helm
(tests/cluster/build-helm): `helm install` (dry run) -> `helm upgrade` (acting) ->
`helm uninstall` leaves nothing behind, and `remediator serve`, run here as a local process with
the chart's ServiceAccount token and the chart's own policy and settings, is granted exactly what
the chart's RBAC says: the API server answers 403 for the rest.

A cluster of its own: the session cluster (conftest.py) already holds deploy/'s objects, which
have the same names. kwok plays the pods (Ready a second after they are bound), so `helm install
--wait` waits on real Deployment and DaemonSet controllers; `helm test` is not run, since kwok
runs no container: the hook's check, GET /readyz, is made against serve instead (its rendering
is checked in tests/deploy/test_helm.py). Argo and Slack are the stand-ins (tests/standins).
"""

from __future__ import annotations

import base64
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.deploy import helm as h
from tests.live.harness import NS, LiveCluster, Serve, wait_for
from tests.standins.argo_server import ArgoStandin
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import Cluster, ClusterError  # noqa: E402

SLACK_TOKEN = "xoxb-helm-test"
CHANNEL = "#llm-oncall"
WEBHOOK_TOKEN = "helm-webhook-token-77a1"
RELEASE_NS = h.NAMESPACE
SERVICE_USER = f"system:serviceaccount:{RELEASE_NS}:remediator"
IGNORED_KINDS = {"Event"}  # written by controllers as they work; not the release's


@pytest.fixture(scope="module")
def helm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    h.helm_bin()  # fail before starting a cluster if helm was never built
    raw = Cluster(tmp_path_factory.mktemp("helm-cluster"))
    try:
        raw.up(nodes=2)
    except ClusterError as exc:
        pytest.fail(f"the real control plane did not come up: {exc}", pytrace=False)
    try:
        live = LiveCluster(raw)
        _prerequisites(live)
        yield live
    finally:
        raw.down()


def _prerequisites(live: LiveCluster) -> None:
    """What docs/deploy.md has the SRE do before `helm install`: the namespaces (the release's
    one pod-security restricted, as the overlay labels it) and the secrets, by reference."""
    restricted = {"pod-security.kubernetes.io/enforce": "restricted"}
    live.apply(
        [
            _namespace(RELEASE_NS, restricted),
            _namespace(NS),
            _namespace("argo"),
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "remediator-secrets", "namespace": RELEASE_NS},
                "stringData": {"slack-bot-token": SLACK_TOKEN, "webhook-token": WEBHOOK_TOKEN},
            },
        ]
    )


def _namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def helm_ok(live: LiveCluster, *args: str) -> str:
    out = h.helm(*args, kubeconfig=live.kubeconfig)
    assert out.returncode == 0, f"helm {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def install(live: LiveCluster, *sets: str) -> None:
    args = ["install", h.RELEASE, str(h.CHART), "-n", RELEASE_NS, "--wait", "--timeout", "180s"]
    helm_ok(live, *args, *[a for kv in sets for a in ("--set", kv)])


def upgrade(live: LiveCluster, *sets: str) -> None:
    args = ["upgrade", h.RELEASE, str(h.CHART), "-n", RELEASE_NS, "--reuse-values", "--wait"]
    helm_ok(live, *args, "--timeout", "180s", *[a for kv in sets for a in ("--set", kv)])


def uninstall(live: LiveCluster) -> None:
    helm_ok(live, "uninstall", h.RELEASE, "-n", RELEASE_NS, "--wait", "--timeout", "180s")


# -- what exists -------------------------------------------------------------------------------


def _listable(live: LiveCluster) -> list[str]:
    """Every resource type the API server lists (discovery), as its list path."""
    paths = []
    groups = [("/api/v1", live.api("GET", "/api/v1"))]
    for g in live.api("GET", "/apis")["groups"]:
        gv = g["preferredVersion"]["groupVersion"]
        groups.append((f"/apis/{gv}", live.api("GET", f"/apis/{gv}")))
    for base, found in groups:
        for r in found["resources"]:
            if "/" not in r["name"] and "list" in r["verbs"] and r["kind"] not in IGNORED_KINDS:
                paths.append(f"{base}/{r['name']}")
    return paths


def snapshot(live: LiveCluster) -> dict[str, str]:
    """uid -> kind namespace/name of every object in the cluster (Events aside)."""
    out = {}
    for path in _listable(live):
        try:
            items = live.api("GET", path)["items"]
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                continue
            raise
        for item in items:
            meta = item["metadata"]
            what = f"{path} {meta.get('namespace', '')}/{meta['name']}"
            out[meta.get("uid", what)] = what  # synthetic kinds (componentstatuses) have no uid
    return out


def left_behind(live: LiveCluster, before: dict[str, str]) -> list[str]:
    now = snapshot(live)
    return sorted(v for uid, v in now.items() if uid not in before)


def assert_nothing_left(live: LiveCluster, before: dict[str, str]) -> None:
    """Garbage collection (ReplicaSets, pods, endpoints) finishes after `uninstall --wait`."""
    try:
        wait_for(lambda: not left_behind(live, before), 90, "nothing left after uninstall")
    except AssertionError:
        assert left_behind(live, before) == []


# -- serve with the chart's identity -----------------------------------------------------------


def chart_configmap(live: LiveCluster, name: str) -> dict[str, str]:
    cm = live.get(f"/api/v1/namespaces/{RELEASE_NS}/configmaps/{name}")
    assert cm is not None, f"ConfigMap {name} not installed"
    return dict(cm["data"])


@pytest.fixture
def serve_as_chart(
    helm_cluster: LiveCluster, tmp_path: Path
) -> Iterator[Callable[[str], tuple[Serve, ArgoStandin]]]:
    """Start serve as the Deployment would: the chart's ServiceAccount, policy and settings."""
    started: list[tuple[Serve, ArgoStandin, SlackStandin]] = []

    def start(argo_token: str) -> tuple[Serve, ArgoStandin]:
        argo = ArgoStandin(token=argo_token).__enter__()
        slack = SlackStandin(token=SLACK_TOKEN, channels=frozenset({CHANNEL})).__enter__()
        settings = chart_configmap(helm_cluster, "remediator-settings")
        policy = chart_configmap(helm_cluster, "remediator-policy")["policy.yaml"]
        env = {**settings, "SLACK_BOT_TOKEN": SLACK_TOKEN, "SLACK_API_URL": slack.url}
        serve = Serve(
            helm_cluster,
            tmp_path / f"serve-{len(started)}",
            policy,
            argo.url,
            argo_token,
            webhook_token=WEBHOOK_TOKEN,
            extra_env=env,
        )
        started.append((serve, argo, slack))
        return serve.start(), argo

    yield start
    for serve, argo, slack in started:
        serve.stop()
        argo.__exit__(None, None, None)
        slack.__exit__(None, None, None)


def readyz(serve: Serve) -> int:
    """What the chart's `helm test` Pod checks, against this serve."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{serve.port}/readyz", timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def api_as(live: LiveCluster, namespace: str, name: str) -> client.ApiClient:
    cfg = client.Configuration()
    kubeconfig = str(live.sa_kubeconfig(namespace, name))
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.ApiClient(cfg)


def status_of(call: Callable[[], object]) -> int:
    """The API server's answer to one call: 200 or the error status."""
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def submit_workflow(api: client.ApiClient) -> Callable[[], object]:
    body = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"generateName": "helm-rbac-"},
        "spec": {"workflowTemplateRef": {"name": "delete-stuck-inference-pod"}},
    }
    objects = client.CustomObjectsApi(api)
    return lambda: objects.create_namespaced_custom_object(
        "argoproj.io", "v1alpha1", "argo", "workflows", body
    )


# -- the tests -----------------------------------------------------------------------------------


def test_dry_run_install_serves_with_the_chart_identity_and_cannot_act(
    helm_cluster: LiveCluster, serve_as_chart: Callable[[str], tuple[Serve, ArgoStandin]]
) -> None:
    before = snapshot(helm_cluster)
    install(helm_cluster)
    try:
        assert chart_configmap(helm_cluster, "remediator-settings")["REMEDIATOR_DRY_RUN"] == "true"
        serve, _ = serve_as_chart("unused-in-a-dry-run")
        wait_for(lambda: readyz(serve) == 200, 60, "serve /readyz with the chart's RBAC")

        api = api_as(helm_cluster, RELEASE_NS, "remediator")
        core = client.CoreV1Api(api)
        # Granted: what the watches need, in the inference namespace; its own Lease.
        assert status_of(lambda: core.list_namespaced_pod(NS)) == 200
        assert status_of(lambda: core.list_namespaced_event(NS)) == 200
        lease = client.CoordinationV1Api(api)
        assert (
            status_of(lambda: lease.read_namespaced_lease("remediator-leader", RELEASE_NS)) == 200
        )
        # Denied by the real authorizer: acting, and everything else.
        denied = {
            "submit a workflow": submit_workflow(api),
            "delete a pod": lambda: core.delete_namespaced_pod("x", NS),
            "read secrets": lambda: core.list_namespaced_secret(RELEASE_NS),
            "pods elsewhere": lambda: core.list_namespaced_pod("kube-system"),
            "another lease": lambda: lease.read_namespaced_lease("other", RELEASE_NS),
            "list nodes": lambda: core.list_node(),
        }
        answers = {what: status_of(call) for what, call in denied.items()}
        assert answers == dict.fromkeys(denied, 403), answers
        # No workflow identity and no Argo token exist in a dry run.
        assert (
            helm_cluster.get("/api/v1/namespaces/argo/serviceaccounts/remediator-workflow") is None
        )
        assert (
            helm_cluster.get(f"/api/v1/namespaces/{RELEASE_NS}/secrets/remediator-argo-token")
            is None
        )
    finally:
        uninstall(helm_cluster)
    assert_nothing_left(helm_cluster, before)


def _argo_token(live: LiveCluster) -> str:
    def filled() -> str | None:
        secret = live.get(f"/api/v1/namespaces/{RELEASE_NS}/secrets/remediator-argo-token")
        token = (secret or {}).get("data", {}).get("token")
        return base64.b64decode(token).decode() if token else None

    return wait_for(filled, 60, "Kubernetes to fill in the chart's Argo token Secret")


def _lease_holder(live: LiveCluster) -> str | None:
    lease = live.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{RELEASE_NS}/leases/remediator-leader"
    )
    return ((lease or {}).get("spec") or {}).get("holderIdentity")


def _replicaset_hashes(live: LiveCluster) -> set[str]:
    pods = live.pods(RELEASE_NS, "app.kubernetes.io/name=remediator")
    return {p["metadata"]["labels"]["pod-template-hash"] for p in pods}


def test_install_upgrade_to_acting_uninstall_leaves_nothing(
    helm_cluster: LiveCluster, serve_as_chart: Callable[[str], tuple[Serve, ArgoStandin]]
) -> None:
    before = snapshot(helm_cluster)
    install(helm_cluster)
    try:
        dry_pods = _replicaset_hashes(helm_cluster)
        workflow = api_as(helm_cluster, RELEASE_NS, "remediator")
        assert status_of(submit_workflow(workflow)) == 403

        # The kill switch, flipped as docs/deploy.md says, survives the upgrade.
        switches = f"/api/v1/namespaces/{RELEASE_NS}/configmaps/remediator-switches"
        flip = {"data": {"kill-switch": "on"}}
        helm_cluster.api("PATCH", switches, flip, ctype="application/merge-patch+json")

        upgrade(helm_cluster, "dryRun=false")

        assert chart_configmap(helm_cluster, "remediator-switches") == {"kill-switch": "on"}

        assert chart_configmap(helm_cluster, "remediator-settings")["REMEDIATOR_DRY_RUN"] == "false"
        # The settings changed, so the pods rolled (the chart's checksum annotation).
        wait_for(lambda: _replicaset_hashes(helm_cluster).isdisjoint(dry_pods), 90, "pods rolled")
        # Allowed now: the authorizer lets it through, and only then is the kind looked up
        # (no Argo CRDs on this cluster: 404, where a dry run got 403).
        assert status_of(submit_workflow(api_as(helm_cluster, RELEASE_NS, "remediator"))) == 404

        token = _argo_token(helm_cluster)
        serve, argo = serve_as_chart(token)
        wait_for(lambda: readyz(serve) == 200, 60, "serve /readyz, acting, with the chart's RBAC")

        steps = client.CoreV1Api(api_as(helm_cluster, "argo", "remediator-workflow"))
        # The workflow steps' identity: pod deletion in the inference namespace only.
        assert status_of(lambda: steps.delete_namespaced_pod("no-such-pod", NS)) == 404
        assert status_of(lambda: steps.delete_namespaced_pod("no-such-pod", "kube-system")) == 403
        assert status_of(lambda: steps.list_namespaced_secret(NS)) == 403
        apps = client.AppsV1Api(api_as(helm_cluster, "argo", "remediator-workflow"))
        patch = {"metadata": {"labels": {"x": "y"}}}
        kube_proxy = lambda: apps.patch_namespaced_daemon_set("kube-proxy", "kube-system", patch)  # noqa: E731
        assert status_of(kube_proxy) == 403  # only gpu-warmup, by name
        warmup = lambda: apps.patch_namespaced_daemon_set("gpu-warmup", "kube-system", patch)  # noqa: E731
        assert status_of(warmup) == 200

        # Back to a dry run, with serve leading: the upgrade must not fight the leader over
        # the Lease it writes (Helm 4 applies server-side; a chart-owned spec field conflicts).
        wait_for(lambda: _lease_holder(helm_cluster) == serve.identity, 30, "serve leads")
        upgrade(helm_cluster, "dryRun=true")
        assert status_of(submit_workflow(api_as(helm_cluster, RELEASE_NS, "remediator"))) == 403
        assert (
            helm_cluster.get("/api/v1/namespaces/argo/serviceaccounts/remediator-workflow") is None
        )
    finally:
        uninstall(helm_cluster)
    assert_nothing_left(helm_cluster, before)
    assert helm_ok(helm_cluster, "list", "-A", "-q").strip() == ""
