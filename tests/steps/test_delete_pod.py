"""`remediator step delete-pod` against the stand-in API server, through the real client."""

from __future__ import annotations

from typing import Any

import pytest

from tests.standins.kube_api import Fault, KubeApiServer, pod
from tests.steps.conftest import run_step

Kube = tuple[KubeApiServer, str]
OTHER_UID = "0b6c1a9e-8b7d-4c6e-9f01-23456789abcd"


def delete(kubeconfig: str, uid: str, *extra: str, name: str = "vllm-0"):  # type: ignore[no-untyped-def]
    return run_step(
        "delete-pod",
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        "llm",
        "--pod",
        name,
        "--uid",
        uid,
        "--incident",
        "inc-42",
        *extra,
    )


def exists(api: KubeApiServer, name: str = "vllm-0") -> bool:
    return bool(api.store.list(api.resource("v1", "pods"), "llm", None, f"metadata.name={name}"))


def test_deletes_the_pod_with_that_uid(kube: Kube) -> None:
    api, kc = kube
    uid = api.store.create(pod("llm", "vllm-0"))["metadata"]["uid"]
    api.store.create(pod("llm", "vllm-1"))
    r = delete(kc, uid, "--grace-period", "30")
    assert r.exit_code == 0
    assert r.verdict["outcome"] == "deleted" and r.verdict["action_taken"] is True
    assert r.verdict["incident"] == "inc-42"
    assert not exists(api) and exists(api, "vllm-1")
    (sent,) = api.sent("DELETE")
    assert sent.path == "/api/v1/namespaces/llm/pods/vllm-0"
    version = sent.body["preconditions"]["resourceVersion"]
    assert sent.body == {
        "preconditions": {"uid": uid, "resourceVersion": version},
        "gracePeriodSeconds": 30,
    }
    (looked,) = api.sent("GET")  # a look again first, without resourceVersion: a quorum read
    assert looked.path == "/api/v1/namespaces/llm/pods/vllm-0" and not looked.query
    assert sent.headers["authorization"] == "Bearer stand-in-token"
    assert all(line["incident"] == "inc-42" for line in r.logs)


def test_never_deletes_a_replacement_with_the_same_name(kube: Kube) -> None:
    api, kc = kube
    new_uid = api.store.create(pod("llm", "vllm-0"))["metadata"]["uid"]  # recreated
    r = delete(kc, OTHER_UID)  # the UID the decision saw, of the old instance
    assert r.exit_code == 0
    assert r.verdict["outcome"] == "replaced" and r.verdict["action_taken"] is False
    assert r.verdict["current_uid"] == new_uid
    assert "left alone" in r.verdict["detail"]
    assert exists(api)
    assert api.sent("DELETE") == []  # the look again saw the new instance


def test_a_pod_already_gone_counts_as_done(kube: Kube) -> None:
    api, kc = kube
    r = delete(kc, OTHER_UID)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["action_taken"]) == (
        0,
        "already_gone",
        False,
    )
    assert api.sent("DELETE") == []


def test_retrying_after_success_is_idempotent(kube: Kube) -> None:
    api, kc = kube
    uid = api.store.create(pod("llm", "vllm-0"))["metadata"]["uid"]
    first, second = delete(kc, uid), delete(kc, uid)
    assert [first.verdict["outcome"], second.verdict["outcome"]] == ["deleted", "already_gone"]
    assert first.exit_code == second.exit_code == 0


def test_dry_run_asks_the_server_and_keeps_the_pod(kube: Kube) -> None:
    api, kc = kube
    uid = api.store.create(pod("llm", "vllm-0"))["metadata"]["uid"]
    r = delete(kc, uid, "--dry-run")
    assert (r.exit_code, r.verdict["outcome"], r.verdict["action_taken"]) == (
        0,
        "would_delete",
        False,
    )
    assert exists(api)
    assert api.sent("DELETE")[0].query == {"dryRun": ["All"]}
    # a dry run still looks again
    assert delete(kc, OTHER_UID, "--dry-run").verdict["outcome"] == "replaced"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--uid", "not-a-uid"),
        ("--uid", "0B6C1A9E-8B7D-4C6E-9F01-23456789ABCD"),  # would never match
        ("--pod", "vllm_0"),
        ("--pod", "vllm-0; kubectl delete ns llm"),
        ("--namespace", "LLM"),
        ("--namespace", "x" * 64),
    ],
)
def test_invalid_input_is_refused_before_any_call(kube: Kube, option: str, value: str) -> None:
    api, kc = kube
    args = {"--namespace": "llm", "--pod": "vllm-0", "--uid": OTHER_UID, option: value}
    flat = [x for kv in args.items() for x in kv]
    r = run_step("delete-pod", "--kubeconfig", kc, *flat)
    assert r.exit_code == 2 and r.stdout == ""
    assert f"Invalid value for '{option}'" in r.stderr
    assert api.requests == []


def test_api_failure_is_a_retryable_error(kube: Kube) -> None:
    api, kc = kube
    uid = api.store.create(pod("llm", "vllm-0"))["metadata"]["uid"]
    api.faults.append(Fault("DELETE", r"/pods/vllm-0$", 500))
    r = delete(kc, uid)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["reason"]) == (5, "error", "api_error")
    assert "HTTP 500" in r.verdict["detail"]
    assert exists(api)
    assert delete(kc, uid).verdict["outcome"] == "deleted"  # the retry Argo would make


def test_forbidden_is_an_error(kube: Kube) -> None:
    api, kc = kube
    api.store.create(pod("llm", "vllm-0", uid=OTHER_UID))
    api.faults.append(Fault("DELETE", r"/pods/", 403, "Forbidden"))
    r = delete(kc, OTHER_UID)
    assert (r.exit_code, r.verdict["reason"]) == (5, "api_error")
    assert "HTTP 403" in r.verdict["detail"]


def test_unreachable_api_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with KubeApiServer() as api:
        kc = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    r = delete(kc, OTHER_UID)  # the server is gone: connection refused
    assert (r.exit_code, r.verdict["reason"]) == (5, "api_unreachable")


def test_missing_kubeconfig_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = delete(str(tmp_path / "nope"), OTHER_UID)
    assert (r.exit_code, r.verdict["reason"]) == (5, "no_kube_config")


# --- issue 18 #2: look again before acting -----------------------------------------------------


def engine_pod(ready: bool = False, started: bool = True, waiting: str = "x") -> dict[str, Any]:
    """A pod the decision found stuck in engine init; `ready`: it got there since; not
    `started`: its engine container waits for `waiting`."""
    doc = pod("llm", "vllm-0")
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": STAMP}]
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": STAMP})
    run = {"running": {"startedAt": STAMP}} if started else {"waiting": {"reason": waiting}}
    doc["status"] = {
        "phase": "Running",
        "conditions": conds,
        "containerStatuses": [
            {
                "name": "vllm",
                "image": "registry.example.com/vllm:0.6.3",
                "imageID": "",
                "ready": ready,
                "restartCount": 0,
                "state": run,
            }
        ],
    }
    return doc


STAMP = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("shown", "phase", "why"),
    [
        (engine_pod(ready=True), "engine_init", "became Ready"),
        (engine_pod(), "container_start", "moved on from container_start to engine_init"),
        (
            engine_pod(started=False, waiting="CreateContainerConfigError"),
            "container_start",
            "cannot be started from its spec (CreateContainerConfigError)",
        ),
    ],
)
def test_a_pod_no_longer_stuck_is_spared_and_never_deleted(
    kube: Kube, shown: dict[str, Any], phase: str, why: str
) -> None:
    api, kc = kube
    uid = api.store.create(shown)["metadata"]["uid"]
    r = delete(kc, uid, "--phase", phase)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["action_taken"]) == (0, "spared", False)
    assert why in r.verdict["detail"]
    assert exists(api) and api.sent("DELETE") == []


def test_a_pod_still_stuck_in_its_phase_is_deleted(kube: Kube) -> None:
    api, kc = kube
    uid = api.store.create(engine_pod())["metadata"]["uid"]
    r = delete(kc, uid, "--phase", "engine_init")
    assert r.verdict["outcome"] == "deleted" and not exists(api)
