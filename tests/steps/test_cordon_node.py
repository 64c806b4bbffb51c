"""`remediator step cordon-node` against the stand-in API server."""

from __future__ import annotations

from tests.standins.kube_api import Fault, KubeApiServer, node
from tests.steps.conftest import StepResult, run_step

Kube = tuple[KubeApiServer, str]


def cordon(kubeconfig: str, name: str = "gpu-node-7", *extra: str) -> StepResult:
    return run_step("cordon-node", "--kubeconfig", kubeconfig, "--node", name, *extra)


def unschedulable(api: KubeApiServer, name: str = "gpu-node-7") -> bool:
    return bool(api.store.objects[("v1", "nodes", None, name)]["spec"].get("unschedulable"))


def test_cordons_a_schedulable_node(kube: Kube) -> None:
    api, kc = kube
    api.store.create(node("gpu-node-7"))
    api.store.create(node("gpu-node-8"))
    r = cordon(kc)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["action_taken"]) == (0, "cordoned", True)
    assert unschedulable(api) and not unschedulable(api, "gpu-node-8")
    (patch,) = api.sent("PATCH")
    assert patch.path == "/api/v1/nodes/gpu-node-7"
    assert patch.body == {"spec": {"unschedulable": True}}


def test_already_cordoned_is_done_without_a_patch(kube: Kube) -> None:
    api, kc = kube
    api.store.create(node("gpu-node-7", unschedulable=True))
    r = cordon(kc)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["action_taken"]) == (
        0,
        "already_cordoned",
        False,
    )
    assert api.sent("PATCH") == []


def test_dry_run_leaves_the_node_schedulable(kube: Kube) -> None:
    api, kc = kube
    api.store.create(node("gpu-node-7"))
    r = cordon(kc, "gpu-node-7", "--dry-run")
    assert (r.exit_code, r.verdict["outcome"]) == (0, "would_cordon")
    assert not unschedulable(api)


def test_missing_node_is_a_precondition_failure(kube: Kube) -> None:
    api, kc = kube
    r = cordon(kc, "gpu-node-404")
    assert (r.exit_code, r.verdict["reason"]) == (3, "not_found")
    assert "gpu-node-404" in r.verdict["detail"]


def test_patch_refused_is_an_error(kube: Kube) -> None:
    api, kc = kube
    api.store.create(node("gpu-node-7"))
    api.faults.append(Fault("PATCH", r"/nodes/", 403, "Forbidden"))
    r = cordon(kc)
    assert (r.exit_code, r.verdict["reason"]) == (5, "api_error")
    assert not unschedulable(api)


def test_invalid_node_name_is_refused(kube: Kube) -> None:
    api, kc = kube
    r = cordon(kc, "GPU node 7")
    assert r.exit_code == 2 and "Invalid value for '--node'" in r.stderr
    assert api.requests == []
