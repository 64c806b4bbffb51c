"""The stuck-inference-pod rule, by phase, found by the timer when the budget lapses."""

from __future__ import annotations

import pytest

from tests.policy.builders import T0, deployment, event, pod
from tests.policy.conftest import Run, make_run

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "99999999-2222-3333-4444-555555555555"
GPU_SHORT = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes"


def test_engine_init_stuck_is_deleted_when_its_budget_lapses(run: Run) -> None:
    # engine_init budget 60 s, 3 checks 10 s apart: due 80 s after the container started
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 89.9)
    assert run.decisions == []
    run.at(T0 + 95)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]
    d = run.decisions[0]
    assert d.at == T0 + 90  # fired at the due time, not at the next input
    assert d.uid == UID_A and d.namespace == "llm"
    assert d.workload == "llm/Deployment/vllm-70b"
    assert "engine_init for 80s" in d.reason and "60s budget" in d.reason


def test_a_pod_that_becomes_ready_in_time_is_left_alone(run: Run) -> None:
    run.feed(
        pod(created=0, scheduled=1, started=10), pod(created=0, scheduled=1, started=10, ready=60)
    )
    run.at(T0 + 3600)
    assert run.decisions == [] and run.held == []


def test_a_pod_recreated_under_the_same_name_is_a_new_timeline(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1, started=10))
    run.feed(pod(created=0, scheduled=1, started=10, watch="DELETED"))
    run.feed(pod(uid=UID_B, watch="ADDED", created=40, scheduled=41, started=50))
    run.at(T0 + 200)
    assert [(d.action, d.uid, d.at) for d in run.decisions] == [("delete-pod", UID_B, T0 + 130)]


def test_a_pod_waiting_for_a_gpu_is_never_deleted_only_told(run: Run) -> None:
    run.feed(pod(created=0, unschedulable=GPU_SHORT))
    run.feed(event("FailedScheduling", GPU_SHORT, 5))
    run.at(T0 + 3600)
    assert [d.action for d in run.decisions] == ["notify"]
    assert "no GPU capacity" in run.decisions[0].reason
    assert "deleting the pod cannot help" in run.decisions[0].reason
    assert run.decisions[0].at == T0 + 620  # 600 s budget + 2 more checks


def test_a_slow_image_pull_is_never_deleted(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1), event("Pulling", 'Pulling image "vllm"', 2))
    run.at(T0 + 3600)
    assert [d.action for d in run.decisions] == ["notify"]
    assert "image pull slow" in run.decisions[0].reason
    assert run.decisions[0].at == T0 + 922


def test_an_image_pull_backing_off_says_so(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1, waiting="ImagePullBackOff"))
    run.feed(event("Pulling", 'Pulling image "vllm"', 2))
    run.feed(event("BackOff", 'Back-off pulling image "vllm"', 30))
    run.at(T0 + 3600)
    assert [d.action for d in run.decisions] == ["notify"]
    assert "backing off (ImagePullBackOff)" in run.decisions[0].reason


def test_container_start_stuck_is_deleted(run: Run) -> None:
    run.feed(pod(created=0, scheduled=1))
    run.feed(event("Pulled", 'Container image "vllm" already present on machine', 2))
    run.at(T0 + 1000)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]
    assert run.decisions[0].at == T0 + 1 + 300 + 20  # from scheduling: nothing was pulled


def test_pods_outside_the_selector_or_namespaces_are_not_watched() -> None:
    run = make_run("stuck_pod: {namespaces: [other]}")
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 3600)
    assert run.decisions == []
    run = make_run("stuck_pod: {selector: 'app=something-else'}")
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 3600)
    assert run.decisions == []


def test_per_model_budget_overrides_the_static_one() -> None:
    run = make_run(
        """
stuck_pod:
  checks: 3
  models:
    meta-llama/Llama-3.1-70B-Instruct: {engine_init: 400}
guardrails: {min_age: {factor: 0}}
"""
    )
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 400)
    assert run.decisions == []
    run.at(T0 + 1000)
    assert run.decisions[0].at == T0 + 10 + 400 + 20
    assert "set for meta-llama/Llama-3.1-70B-Instruct" in run.decisions[0].reason


def test_adaptive_budget_learns_from_completed_cold_starts(run: Run) -> None:
    # five 70B pods that each took 236 s of engine init
    for i in range(5):
        uid = f"aaaaaaaa-0000-0000-0000-00000000000{i}"
        name = f"vllm-70b-7c9d5b6f4-p{i}"
        start = i * 1000.0
        run.feed(
            pod(
                name, uid, created=start, scheduled=start + 1, started=start + 10, ready=start + 246
            )
        )
    assert run.decisions == []
    # now a pod at 200 s of engine init is normal for this model: 1.5 × 236 s, widened by
    # 1.54 for five samples of a window of 50 (history.few_samples_margin) = 545 s budget
    run.feed(pod("vllm-70b-7c9d5b6f4-new", UID_B, created=9000, scheduled=9001, started=9010))
    run.at(T0 + 9010 + 540)
    assert run.decisions == []
    run.at(T0 + 9010 + 700)
    assert run.decisions[0].at == pytest.approx(T0 + 9010 + 1.5 * 1.54 * 236 + 20)
    assert "adaptive 2.31×P99" in run.decisions[0].reason


def test_min_age_holds_a_young_pod_then_lets_the_delete_through() -> None:
    # Defaults: expected cold start 600 s for a model with no history; static budgets (the
    # floor a phase with no history gets, a whole cold start, would hold it as long).
    run = make_run("stuck_pod: {adaptive: {enabled: false}}")
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 100)
    assert run.decisions == [] and [s.guardrail for s in run.held] == ["min_age"]
    run.at(T0 + 700)
    assert run.actions() == [("delete-pod", "vllm-70b-7c9d5b6f4-abcde")]
    assert T0 + 600 <= run.decisions[0].at <= T0 + 640


def test_dry_run_and_kill_switch_hold_every_delete_with_their_names() -> None:
    static = "stuck_pod: {adaptive: {enabled: false}}\n"
    run = make_run(static + "guardrails: {dry_run: {enabled: true}, min_age: {factor: 0}}")
    run.feed(pod(created=0, scheduled=1, started=10)).at(T0 + 100)
    assert run.decisions == [] and run.held[0].guardrail == "dry_run"
    run = make_run(static + "guardrails: {min_age: {factor: 0}}")
    run.session.set_kill_switch(True, "incident 4711 in progress")
    run.feed(pod(created=0, scheduled=1, started=10)).at(T0 + 100)
    assert run.decisions == [] and run.held[0].guardrail == "kill_switch"
    assert "incident 4711" in run.held[0].reason


def test_a_deletion_the_rate_limit_holds_goes_at_its_turn_not_a_check_later() -> None:
    """Two pods over budget at once, a token every 10 s: the second is held once, queued,
    and deleted when its token comes (10 s later), not at the next 30 s look."""
    run = make_run(
        "stuck_pod: {checks: 3, expected_cold_start_s: 0}\n"
        "image_update: {enabled: false}\n"
        "guardrails: {min_age: {factor: 0}, rate_limit: {per_minute: 6, burst: 1}}"
    )
    run.feed(deployment("vllm/vllm-openai:v0.6.4", watch="ADDED"))  # 4 replicas: 2 may go
    run.feed(pod(created=0, scheduled=1, started=10))
    run.feed(pod("vllm-70b-7c9d5b6f4-fghij", UID_B, created=0, scheduled=1, started=10))
    run.at(T0 + 95)
    assert [d.at - T0 for d in run.decisions] == [90]
    (held,) = run.held
    assert held.guardrail == "rate_limit" and held.queued and held.retry_at == T0 + 100
    assert "queued 1st, its turn at" in held.reason
    run.at(T0 + 100)
    assert [d.at - T0 for d in run.decisions] == [90, 100]
    assert {d.uid for d in run.decisions} == {UID_A, UID_B}
    assert len(run.held) == 1  # held once
