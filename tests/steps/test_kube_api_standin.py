"""The stand-in API server itself, through the real client: what the steps rely on
and what later stand-in tests will (lists, selectors, patches, Status bodies)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, config

from tests.standins.kube_api import (
    KubeApiServer,
    daemonset,
    label_selector_matches,
    pod,
    strategic_merge_patch,
)

Kube = tuple[KubeApiServer, str]


def core_and_apps(kubeconfig: str) -> tuple[client.CoreV1Api, client.AppsV1Api]:
    cfg = client.Configuration()
    config.load_kube_config(kubeconfig, client_configuration=cfg, persist_config=False)
    api = client.ApiClient(cfg)
    return client.CoreV1Api(api), client.AppsV1Api(api)


def test_list_with_label_selector(kube: Kube) -> None:
    api, kc = kube
    core, _ = core_and_apps(kc)
    api.store.create(pod("llm", "vllm-0"))
    api.store.create(pod("llm", "other", labels={"app": "other"}))
    api.store.create(pod("default", "vllm-x"))
    names = [
        p.metadata.name
        for p in core.list_namespaced_pod("llm", label_selector="app=vllm-inference").items
    ]
    assert names == ["vllm-0"]
    every = core.list_pod_for_all_namespaces(label_selector="app in (vllm-inference)").items
    assert sorted(p.metadata.name for p in every) == ["vllm-0", "vllm-x"]


@pytest.mark.parametrize(
    ("selector", "labels", "match"),
    [
        ("app=vllm", {"app": "vllm"}, True),
        ("app==vllm,tier!=gpu", {"app": "vllm", "tier": "gpu"}, False),
        ("app in (a, b),!canary", {"app": "b"}, True),
        ("app notin (a,b)", {}, True),
        ("model", {"model": "70b"}, True),
        ("!model", {"model": "70b"}, False),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], match: bool) -> None:
    assert label_selector_matches(selector, labels) is match


def test_not_found_and_conflict_are_real_status_objects(kube: Kube) -> None:
    api, kc = kube
    core, apps = core_and_apps(kc)
    with pytest.raises(client.ApiException) as missing:
        apps.read_namespaced_daemon_set("gpu-warmup", "kube-system")
    assert missing.value.status == 404
    assert json.loads(missing.value.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'daemonsets.apps "gpu-warmup" not found',
        "reason": "NotFound",
        "details": {"name": "gpu-warmup", "group": "apps", "kind": "daemonsets"},
        "code": 404,
    }
    api.store.create(pod("llm", "vllm-0"))
    with pytest.raises(client.ApiException) as exists:
        core.create_namespaced_pod("llm", pod("llm", "vllm-0"))
    assert (exists.value.status, json.loads(exists.value.body)["reason"]) == (409, "AlreadyExists")


def test_unknown_resource_is_404_and_a_wrong_token_401(kube: Kube) -> None:
    api, kc = kube
    auth = {"authorization": "Bearer stand-in-token"}
    code, body = api.handle("GET", "/api/v1/namespaces/llm/widgets", auth, b"")
    assert (code, body["reason"], body["kind"]) == (404, "NotFound", "Status")
    core, _ = core_and_apps(kc)
    api.token = "another-token"
    with pytest.raises(client.ApiException) as denied:
        core.list_namespaced_pod("llm")
    assert denied.value.status == 401


def test_spec_change_bumps_generation_and_metadata_change_does_not(kube: Kube) -> None:
    api, kc = kube
    _, apps = core_and_apps(kc)
    api.store.create(daemonset("kube-system", "gpu-warmup"))
    labels = apps.patch_namespaced_daemon_set(
        "gpu-warmup", "kube-system", {"metadata": {"labels": {"x": "y"}}}
    )
    assert labels.metadata.generation == 1
    spec = apps.patch_namespaced_daemon_set(
        "gpu-warmup",
        "kube-system",
        {"spec": {"template": {"metadata": {"annotations": {"a": "b"}}}}},
    )
    assert spec.metadata.generation == 2
    assert int(spec.metadata.resource_version) > int(labels.metadata.resource_version)


def test_strategic_merge_merges_containers_by_name() -> None:
    target = {
        "containers": [{"name": "a", "image": "1", "command": ["x"]}, {"name": "b", "image": "2"}]
    }
    patch = {"containers": [{"name": "b", "image": "3"}, {"name": "c", "image": "4"}]}
    assert strategic_merge_patch(target, patch) == {
        "containers": [
            {"name": "a", "image": "1", "command": ["x"]},
            {"name": "b", "image": "3"},
            {"name": "c", "image": "4"},
        ]
    }
    assert strategic_merge_patch(target, {"containers": [{"name": "a", "$patch": "delete"}]}) == {
        "containers": [{"name": "b", "image": "2"}]
    }
