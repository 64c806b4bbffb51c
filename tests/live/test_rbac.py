"""deploy/'s RBAC on the real API server: what serve and the workflow steps are granted works,
what they are not granted is really denied (the stand-in API never enforced RBAC)."""

from __future__ import annotations

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.live.harness import NS, LiveCluster


def api_as(live: LiveCluster, namespace: str, name: str) -> client.ApiClient:
    cfg = client.Configuration()
    kubeconfig = str(live.sa_kubeconfig(namespace, name))
    config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.ApiClient(cfg)


def test_serve_can_watch_its_namespaces_and_read_its_lease(cluster: LiveCluster) -> None:
    api = api_as(cluster, "remediator", "remediator")
    core = client.CoreV1Api(api)
    # Raw answers: the client's own models refuse events.k8s.io Events whose eventTime is null,
    # which the API server serves for every core/v1 Event (kwok's and the kubelet's recorder).
    raw = {"limit": 1, "_preload_content": False}
    assert core.list_namespaced_pod(NS, **raw).status == 200
    assert core.list_namespaced_event(NS, **raw).status == 200
    assert client.EventsV1Api(api).list_namespaced_event(NS, **raw).status == 200
    assert client.AppsV1Api(api).list_namespaced_deployment(NS, **raw).status == 200
    lease = client.CoordinationV1Api(api).read_namespaced_lease("remediator-leader", "remediator")
    assert lease.metadata.name == "remediator-leader"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(
            lambda api: client.CoreV1Api(api).delete_namespaced_pod("x", NS), id="delete-pod"
        ),
        pytest.param(
            lambda api: client.CoreV1Api(api).list_namespaced_secret(NS), id="list-secrets"
        ),
        pytest.param(
            lambda api: client.CoreV1Api(api).list_namespaced_pod("kube-system"),
            id="pods-elsewhere",
        ),
        pytest.param(
            lambda api: client.CoordinationV1Api(api).read_namespaced_lease("other", "remediator"),
            id="another-lease",
        ),
        pytest.param(lambda api: client.CoreV1Api(api).list_node(), id="list-nodes"),
    ],
)
def test_serve_is_denied_what_deploy_does_not_grant(cluster: LiveCluster, call: object) -> None:
    api = api_as(cluster, "remediator", "remediator")
    with pytest.raises(ApiException) as err:
        call(api)  # type: ignore[operator]
    assert err.value.status == 403, err.value.body
    assert "system:serviceaccount:remediator:remediator" in err.value.body


def test_the_workflow_identity_deletes_pods_but_reads_no_secrets(cluster: LiveCluster) -> None:
    api = api_as(cluster, "argo", "remediator-workflow")
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as missing:
        core.delete_namespaced_pod("no-such-pod", NS)
    assert missing.value.status == 404  # allowed, and the pod is not there
    with pytest.raises(ApiException) as denied:
        core.list_namespaced_secret(NS)
    assert denied.value.status == 403
    with pytest.raises(ApiException) as other_ds:
        client.AppsV1Api(api).patch_namespaced_daemon_set(
            "kube-proxy", "kube-system", {"metadata": {"labels": {"x": "y"}}}
        )
    assert other_ds.value.status == 403  # only gpu-warmup, by resourceName
