"""Alertmanager alerts: act only on firing, only on a pod still not Ready, never guess."""

from __future__ import annotations

import pytest

from tests.policy.builders import T0, alert, pod
from tests.policy.conftest import Run

POD = {"namespace": "llm", "pod": "vllm-70b-7c9d5b6f4-abcde"}


def stuck(run: Run) -> Run:
    return run.feed(pod(created=0, scheduled=1, started=10))


def test_firing_alert_on_a_pod_in_engine_init_deletes_it(run: Run) -> None:
    stuck(run).feed(alert("firing", POD, 40))
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]
    assert run.decisions[0].at == T0 + 40
    assert "alert VLLMEngineInitSlow firing; pod in engine_init for 30s" in run.decisions[0].reason


def test_resolved_alert_is_never_acted_on(run: Run) -> None:
    # robusta#345: a resolved alert deleted a freshly created healthy pod
    stuck(run).feed(alert("resolved", POD, 15))  # endsAt 75: before the timer
    assert run.decisions == []
    assert "resolved" in run.notes[0].reason


def test_firing_alert_on_a_ready_pod_is_ignored(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1, started=10, ready=50), alert("firing", POD, 60))
    assert run.decisions == []
    assert "is ready: nothing to do" in run.notes[0].reason


def test_repeated_alert_acts_once(run: Run) -> None:
    stuck(run).feed(alert("firing", POD, 40), alert("firing", POD, 40), alert("firing", POD, 70))
    assert len(run.decisions) == 1
    assert {s.guardrail for s in run.held} <= {"idempotency", "dedup"} and len(run.held) == 2


def test_timer_and_alert_on_the_same_stuck_pod_are_one_incident(run: Run) -> None:
    stuck(run).at(T0 + 100)  # the timer deletes at T0+90
    run.feed(alert("firing", POD, 101))
    assert len(run.decisions) == 1
    assert run.held[0].decision.incident == run.decisions[0].incident


def test_alert_for_a_pod_recreated_under_the_same_name_means_the_new_pod(run: Run) -> None:
    stuck(run).feed(pod(created=0, scheduled=1, started=10, watch="DELETED"))
    new_uid = "99999999-2222-3333-4444-555555555555"
    run.feed(pod(uid=new_uid, watch="ADDED", created=30, scheduled=31, started=35))
    run.feed(alert("firing", POD, 40))
    assert [d.uid for d in run.decisions] == [new_uid]


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"namespace": "llm"}, "no pod label"),
        ({"pod": "vllm-0"}, "no namespace label"),
        ({"namespace": "llm", "pod": "x; kubectl delete ns llm"}, "not valid Kubernetes names"),
        ({"namespace": "llm", "pod": "$(reboot)"}, "not valid Kubernetes names"),
        ({"namespace": "llm", "pod": "never-seen"}, "is not tracked"),
    ],
)
def test_alert_without_a_trustworthy_pod_is_ignored_never_guessed(
    run: Run, labels: dict[str, str], says: str
) -> None:
    stuck(run).feed(alert("firing", labels, 40))
    assert run.decisions == []
    assert says in run.notes[0].reason


def test_alert_on_a_pod_waiting_for_gpus_notifies(run: Run) -> None:
    run.feed(
        pod(created=0, unschedulable="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    )
    run.feed(alert("firing", POD, 40))
    assert [d.action for d in run.decisions] == ["notify"]
    assert "no GPU capacity" in run.decisions[0].reason


def test_other_alerts_pass_by(run: Run) -> None:
    stuck(run).feed(alert("firing", POD, 40, name="KubeNodeNotReady"))
    assert run.decisions == [] and run.notes == []


def test_gpu_memory_alert_verifies_the_node_and_an_unstable_verdict_is_told(run: Run) -> None:
    run.feed(alert("firing", {"node": "gpu-node-7"}, 10, name="GPUMemoryUnstable"))
    assert [(d.action, d.target) for d in run.decisions] == [("verify-gpu-memory", "gpu-node-7")]
    run.feed(
        {
            "kind": "GpuMemoryVerdict",
            "node": "gpu-node-7",
            "stable": False,
            "detail": "GPU 3 spread 8192 MiB > 512 MiB",
            "time": "2025-10-09T09:00:00Z",
        }
    )
    assert [d.action for d in run.decisions] == ["verify-gpu-memory", "notify", "cordon-node"]
    assert "8192 MiB" in run.decisions[1].reason
    assert run.decisions[2].target == "gpu-node-7"  # cordoning is on by default
    run.feed(
        {
            "kind": "GpuMemoryVerdict",
            "node": "gpu-node-8",
            "stable": True,
            "time": "2025-10-09T09:01:00Z",
        }
    )
    assert len(run.decisions) == 3  # a node never found unsettled: nothing to say


def test_with_cordoning_off_on_call_is_told_to_cordon() -> None:
    from tests.policy.conftest import make_run

    run = make_run("gpu_memory: {cordon: false}")
    run.feed({"kind": "GpuMemoryVerdict", "node": "gpu-node-7", "stable": False,
              "time": "2025-10-09T09:00:00Z"})  # fmt: skip
    assert [d.action for d in run.decisions] == ["notify"]
    assert "cordon it (kubectl cordon)" in run.decisions[0].reason


def test_gpu_alert_without_a_node_label_is_ignored(run: Run) -> None:
    run.feed(alert("firing", {"job": "dcgm"}, 10, name="GPUMemoryUnstable"))
    assert run.decisions == [] and "no node label" in run.notes[0].reason


def test_one_verification_with_two_unstable_nodes_cordons_both() -> None:
    from tests.policy.conftest import make_run

    run = make_run("gpu_memory: {cordon: true}\nguardrails: {min_age: {factor: 0}}")
    for node in ("gpu-node-1", "gpu-node-2"):
        run.feed({"kind": "GpuMemoryVerdict", "node": node, "stable": False,
                  "incident": "image-update-abc", "time": "2025-10-09T09:00:00Z"})  # fmt: skip
    cordoned = [d.target for d in run.decisions if d.action == "cordon-node"]
    assert cordoned == ["gpu-node-1", "gpu-node-2"]
    told = [d for d in run.decisions if d.action == "notify"]
    assert [d.target for d in told] == cordoned
    assert all("; cordoning it (unless guardrails hold that" in d.reason for d in told)


def test_a_node_check_the_rate_limit_held_is_asked_again_not_dropped() -> None:
    """Found in the fleet simulator (nodes whose GPU memory never settles): a wave of
    deletions spent the rate limit, the GPU alerts' checks of two nodes were held, and
    nothing asked for them again (the alert fires once; Alertmanager repeats it hours
    later), so pods kept landing on those nodes and hanging there."""
    from tests.policy.conftest import make_run

    run = make_run("guardrails: {rate_limit: {per_minute: 1, burst: 1}}")
    for i, node in enumerate(("gpu-node-1", "gpu-node-2", "gpu-node-3")):
        run.feed(alert("firing", {"node": node}, 10 + i, name="GPUMemoryUnstable",
                       fingerprint=f"f{i}"))  # fmt: skip
    assert [d.target for d in run.decisions] == ["gpu-node-1"]
    assert [(h.guardrail, h.decision.target) for h in run.held] == [
        ("rate_limit", "gpu-node-2"), ("rate_limit", "gpu-node-3")]  # fmt: skip
    run.at(T0 + 200)  # a token a minute: both again, each once, in their turn
    checked = [(d.action, d.target) for d in run.decisions]
    assert checked == [("verify-gpu-memory", f"gpu-node-{i}") for i in (1, 2, 3)]
    assert all("(held; asked again)" in d.reason for d in run.decisions[1:])
    assert run.decisions[1].incident == run.held[0].decision.incident
    run.at(T0 + 3600)
    assert len(run.decisions) == 3  # nothing asked twice once through


def test_past_the_cordon_cap_a_cordon_is_held_and_asked_again_a_day_on() -> None:
    """Many nodes found unsettled at once (a driver rollout, a broken verification image):
    cordon_cap lets the first `max_nodes` through; the next is held, not dropped, and asked
    again when the first cordon leaves the window."""
    from tests.policy.conftest import make_run

    run = make_run("guardrails: {rate_limit: {per_minute: 600, burst: 100}, "
                   "cordon_cap: {max_nodes: 2}}")  # fmt: skip
    for node in ("gpu-node-1", "gpu-node-2", "gpu-node-3"):
        run.feed({"kind": "GpuMemoryVerdict", "node": node, "stable": False,
                  "time": "2025-10-09T09:00:00Z"})  # fmt: skip
    cordoned = [d.target for d in run.decisions if d.action == "cordon-node"]
    assert cordoned == ["gpu-node-1", "gpu-node-2"]
    assert [(h.guardrail, h.decision.target) for h in run.held] == [("cordon_cap", "gpu-node-3")]
    run.at(run.held[0].retry_at - 60)  # type: ignore[operator]
    assert [d.target for d in run.decisions if d.action == "cordon-node"] == cordoned
    run.at(run.held[0].retry_at + 60)  # type: ignore[operator]
    late = [d for d in run.decisions if d.action == "cordon-node"][2:]
    assert [d.target for d in late] == ["gpu-node-3"] and "(held; asked again)" in late[0].reason
