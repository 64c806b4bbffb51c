"""`remediator step rollout-restart` against the stand-in API server and its
stand-in DaemonSet controller (advances the rollout each time it is read)."""

from __future__ import annotations

from tests.standins.kube_api import DaemonSetRollout, Fault, KubeApiServer, daemonset
from tests.steps.conftest import StepResult, run_step

Kube = tuple[KubeApiServer, str]
NEW = "registry.example.com/vllm:0.6.3"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def restart(kubeconfig: str, *extra: str, timeout: str = "30") -> StepResult:
    return run_step(
        "rollout-restart",
        "--kubeconfig",
        kubeconfig,
        "-n",
        "kube-system",
        "--daemonset",
        "gpu-warmup",
        "--timeout",
        timeout,
        "--poll-interval",
        "0.01",
        *extra,
    )


def stored(api: KubeApiServer) -> dict:  # type: ignore[type-arg]
    return api.store.objects[("apps/v1", "daemonsets", "kube-system", "gpu-warmup")]


def seed(api: KubeApiServer, rollout: DaemonSetRollout, **kw: object) -> None:
    api.store.create(daemonset("kube-system", "gpu-warmup", desired=rollout.desired, **kw))  # type: ignore[arg-type]
    api.daemonset_rollout("kube-system", "gpu-warmup", rollout)


def test_restart_with_new_image_rolls_out(kube: Kube) -> None:
    api, kc = kube
    rollout = DaemonSetRollout(desired=4, finish_after=3)
    seed(api, rollout)
    r = restart(kc, "--image", NEW)
    assert (r.exit_code, r.verdict["outcome"]) == (0, "rolled_out")
    assert r.verdict["generation"] == 2 and r.verdict["action_taken"] is True
    (patch,) = api.sent("PATCH")
    assert patch.headers["content-type"] == "application/strategic-merge-patch+json"
    template = patch.body["spec"]["template"]
    assert template["spec"] == {"initContainers": [{"name": "prepull", "image": NEW}]}
    assert template["metadata"]["annotations"][RESTARTED_AT] == r.verdict["restarted_at"]
    # the init container changed in place; its command and the main container did not
    pod_spec = stored(api)["spec"]["template"]["spec"]
    assert pod_spec["initContainers"] == [
        {"name": "prepull", "image": NEW, "command": ["/bin/true"]}
    ]
    assert pod_spec["containers"][0]["image"] == "registry.example.com/gpu-warm:1"
    assert rollout.reads >= 4  # read before the patch, then polled until done
    assert r.verdict["detail"] == "successfully rolled out: 4 of 4 updated and available"
    progress = [line["msg"] for line in r.logs if "rollout_done" in line]
    assert progress[0] != progress[-1] and progress[-1] == r.verdict["detail"]


def test_restart_without_image_only_stamps_the_annotation(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=2, finish_after=1))
    r = restart(kc)
    assert r.exit_code == 0
    assert "spec" not in api.sent("PATCH")[0].body["spec"]["template"]
    assert stored(api)["spec"]["template"]["spec"]["initContainers"][0]["image"].endswith("0.6.2")
    assert RESTARTED_AT in stored(api)["spec"]["template"]["metadata"]["annotations"]


def test_rollout_that_never_finishes_times_out(kube: Kube) -> None:
    api, kc = kube
    rollout = DaemonSetRollout(desired=4, finish_after=None)  # one pod never comes up
    seed(api, rollout)
    r = restart(kc, "--image", NEW, timeout="0.2")
    assert (r.exit_code, r.verdict["outcome"]) == (4, "timeout")
    assert r.verdict["action_taken"] is True  # the restart was made; the rollout hangs
    assert "3 out of 4 new pods have been updated" in r.verdict["detail"]
    assert stored(api)["spec"]["template"]["spec"]["initContainers"][0]["image"] == NEW


def test_controller_that_never_observes_times_out(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=4, observe=False))
    r = restart(kc, timeout="0.1")
    assert r.exit_code == 4
    assert "spec update to be observed" in r.verdict["detail"]


def test_missing_daemonset_is_a_precondition_failure(kube: Kube) -> None:
    api, kc = kube
    r = restart(kc, "--image", NEW)
    assert (r.exit_code, r.verdict["outcome"], r.verdict["reason"]) == (
        3,
        "precondition_failed",
        "not_found",
    )
    assert api.sent("PATCH") == []


def test_missing_init_container_is_refused_without_a_change(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=2), init_name="warm-pull")
    r = restart(kc, "--image", NEW)
    assert (r.exit_code, r.verdict["reason"]) == (3, "no_such_init_container")
    assert "warm-pull" in r.verdict["detail"]
    assert api.sent("PATCH") == []
    # naming the right container works
    assert restart(kc, "--image", NEW, "--container", "warm-pull").exit_code == 0


def test_on_delete_strategy_is_refused(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=2), strategy="OnDelete")
    r = restart(kc)
    assert (r.exit_code, r.verdict["reason"]) == (3, "not_rolling_update")
    assert api.sent("PATCH") == []


def test_dry_run_patches_nothing_and_does_not_wait(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=2, finish_after=None))
    r = restart(kc, "--image", NEW, "--dry-run")
    assert (r.exit_code, r.verdict["outcome"]) == (0, "would_restart")
    assert api.sent("PATCH")[0].query == {"dryRun": ["All"]}
    assert stored(api)["metadata"]["generation"] == 1
    assert len(api.sent("GET")) == 1


def test_api_failure_during_wait_is_an_error(kube: Kube) -> None:
    api, kc = kube
    seed(api, DaemonSetRollout(desired=2, finish_after=5))
    fault = Fault("GET", r"/daemonsets/gpu-warmup$", 503, "ServiceUnavailable", after=2)
    api.faults.append(fault)
    r = restart(kc)
    assert (r.exit_code, r.verdict["reason"]) == (5, "api_error")
    assert len(api.sent("PATCH")) == 1 and fault.times == 0
    assert "HTTP 503" in r.verdict["detail"]


def test_bad_image_and_names_are_refused(kube: Kube) -> None:
    api, kc = kube
    for extra in (
        ["--image", "registry/vllm:0.6.3 && rm -rf /"],
        ["--image", "Registry/VLLM"],
        ["--container", "Pre_Pull"],
    ):
        r = restart(kc, *extra)
        assert r.exit_code == 2 and "Invalid value" in r.stderr, extra
    assert run_step("rollout-restart", "-n", "kube-system", "--daemonset", "x").exit_code == 2
    assert api.requests == []
