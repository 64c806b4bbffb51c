"""A new model image on an inference workload restarts the GPU warmup DaemonSet."""

from __future__ import annotations

import pytest

from remediator.contract.errors import ConfigError
from tests.policy.builders import T0, deployment
from tests.policy.conftest import Run, make_run

OLD, NEW = "vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.6.4"


def test_template_image_change_restarts_warmup_with_the_new_image(run: Run) -> None:
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2, at=60))
    assert [(d.action, d.namespace, d.target) for d in run.decisions] == [
        ("restart-warmup", "kube-system", "gpu-warmup")
    ]
    d = run.decisions[0]
    assert d.param("image") == NEW and d.param("timeout") == "900"
    assert d.workload == "llm/Deployment/vllm-70b"
    assert OLD in d.reason and NEW in d.reason


def test_status_only_updates_are_not_updates(run: Run) -> None:
    run.feed(deployment(OLD, watch="ADDED"))
    run.feed(deployment(OLD, ready=1), deployment(OLD, ready=0), deployment(OLD, ready=4))
    assert run.decisions == []


def test_first_sighting_is_not_an_update(run: Run) -> None:
    # a restart of remediator lists every workload as ADDED (or MODIFIED on a resync)
    run.feed(deployment(NEW, watch="ADDED"))
    run.feed(deployment(NEW))
    assert run.decisions == []


def test_model_change_alone_is_an_update(run: Run) -> None:
    run.feed(deployment(OLD, watch="ADDED"), deployment(OLD, generation=2, model="Qwen/Qwen2-72B"))
    assert [d.action for d in run.decisions] == ["restart-warmup"]
    assert "model" in run.decisions[0].reason


def test_the_same_update_seen_twice_acts_once_and_a_quick_rollback_waits(run: Run) -> None:
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2, at=60))
    run.feed(deployment(OLD, generation=3, at=120), deployment(NEW, generation=4, at=180))
    assert len(run.decisions) == 1
    # the rollback to OLD is a new incident held as a repeat on the same warmup (dedup);
    # NEW again is the incident already acted on
    assert [s.guardrail for s in run.held] == ["dedup", "idempotency"]


def test_configured_warmup_target_and_disabled_rule() -> None:
    run = make_run("image_update: {warmup_namespace: gpu-ops, warmup_daemonset: prewarm}")
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2))
    assert [(d.namespace, d.target) for d in run.decisions] == [("gpu-ops", "prewarm")]
    run = make_run("image_update: {enabled: false}")
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2))
    assert run.decisions == []


def test_an_update_that_carries_its_before_is_compared_without_a_watch(run: Run) -> None:
    """What sensors/sensor-image-update-to-remediator.yaml posts: a webhook-only service
    has never seen the workload, and still tells an image update from a first sighting."""
    old, new = deployment(OLD)["object"], deployment(NEW, generation=2, at=60)["object"]
    run.feed(
        {
            "specversion": "1.0",
            "id": "e1",
            "source": "argo-events/inference-workloads",
            "type": "io.k8s.watch.workload",
            "time": "2025-10-09T09:00:00Z",
            "data": {"type": "MODIFIED", "object": new, "oldObject": old},
        }
    )
    assert [(d.action, d.param("image")) for d in run.decisions] == [("restart-warmup", NEW)]


def test_argo_events_resource_envelope_with_old_body(run: Run) -> None:
    old, new = deployment(OLD)["object"], deployment(NEW, generation=2, at=60)["object"]
    run.feed(
        {
            "specversion": "1.0",
            "id": "e2",
            "source": "inference-workloads",
            "type": "resource",
            "data": {"type": "UPDATE", "body": new, "oldBody": old, "group": "apps"},
        }
    )
    assert [d.action for d in run.decisions] == ["restart-warmup"]
    # the same update again (the service also watches): one incident, acted on once
    run.feed(deployment(OLD, generation=1), deployment(NEW, generation=2, at=60))
    assert len(run.decisions) == 1


NEWER = "vllm/vllm-openai:v0.6.5"


def test_a_second_image_change_held_as_a_repeat_is_warmed_when_the_hold_ends(run: Run) -> None:
    """Issue 18, defect 12: two image changes 8 s apart. The second is held by dedup (the
    same warmup DaemonSet); when dedup's window ends it is asked again and let through
    for the newest image, so the GPU nodes never keep a superseded one pre-pulled."""
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2, at=60))
    run.feed(deployment(NEWER, generation=3, at=68))
    assert [s.guardrail for s in run.held] == ["dedup"]
    assert run.held[0].retry_at is not None
    run.at(T0 + 3600)
    assert [d.param("image") for d in run.decisions] == [NEW, NEWER]
    assert run.decisions[1].at == run.held[0].retry_at


def test_a_held_warmup_for_an_image_rolled_back_from_is_not_run(run: Run) -> None:
    """Held for NEWER, then the Deployment went back to NEW (warmed already, held as that
    incident again): the newest state is warmed, so nothing more is run."""
    run.feed(deployment(OLD, watch="ADDED"), deployment(NEW, generation=2, at=60))
    run.feed(deployment(NEWER, generation=3, at=68), deployment(NEW, generation=4, at=70))
    run.at(T0 + 3600)
    assert [d.action for d in run.decisions] == ["restart-warmup"]


def _mixed(run: Run, big_gpus: int) -> Run:
    """A second inference Deployment on the pool, then the first one's image changes."""
    run.feed(
        deployment(OLD, watch="ADDED"),
        deployment(OLD, watch="ADDED", name="vllm-405b", gpus=big_gpus),
        deployment(NEW, generation=2, at=60),
    )
    return run


def test_no_warmup_where_the_pools_pods_need_different_gpu_counts(run: Run) -> None:
    """Warming puts the image on every node; kube-scheduler's default scoring then spreads
    the 2-GPU pods over the emptiest nodes, and the 8-GPU pods wait for a whole one."""
    _mixed(run, 8)
    assert run.decisions == []
    (note,) = [n for n in run.notes if n.rule == "image_update"]
    assert note.subject == "llm/Deployment/vllm-70b"
    assert "pods need 2, 8 GPUs" in note.reason and NEW in note.reason
    assert "image_update.mixed_gpus: warm" in note.reason


def test_the_same_gpu_counts_are_warmed(run: Run) -> None:
    _mixed(run, 2)
    assert [d.action for d in run.decisions] == ["restart-warmup"]


def test_mixed_gpus_warm_warms_anyway() -> None:
    run = _mixed(make_run("image_update: {mixed_gpus: warm}"), 8)
    assert [d.action for d in run.decisions] == ["restart-warmup"]


def test_a_workload_the_rule_does_not_select_does_not_count(run: Run) -> None:
    """A training job's Deployment (another label) on other nodes mixes nothing."""
    job = deployment(OLD, watch="ADDED", name="trainer", gpus=8)
    job["object"]["spec"]["template"]["metadata"]["labels"] = {"app": "trainer"}
    run.feed(deployment(OLD, watch="ADDED"), job, deployment(NEW, generation=2, at=60))
    assert [d.action for d in run.decisions] == ["restart-warmup"]


def test_mixed_gpus_is_one_of_two_choices() -> None:
    with pytest.raises(ConfigError, match="image_update.mixed_gpus"):
        make_run("image_update: {mixed_gpus: spread}")


def test_a_workload_scaled_to_zero_mixes_nothing(run: Run) -> None:
    idle = deployment(OLD, watch="ADDED", name="vllm-405b", gpus=8)
    idle["object"]["spec"]["replicas"] = 0
    run.feed(deployment(OLD, watch="ADDED"), idle, deployment(NEW, generation=2, at=60))
    assert [d.action for d in run.decisions] == ["restart-warmup"]
