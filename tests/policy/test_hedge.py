"""Hedged starts (issue 20): a pod stalled in a vLLM step gets its replacement started early
(`hedge-pod`), before it counts as hung and is deleted. Real vLLM lines (tests/data/vllm_logs)
at made-up times, as in test_progress: five healthy siblings teach the steps, then one stalls.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.errors import ConfigError
from remediator.core.guard import HedgeBudgetGauges
from remediator.guard.hedge_budget import RACED_SLACK_S, SETTLE_SLACK_S, HedgeBudgetState
from remediator.inputs.hedge_annotation import HEDGE, Hedge, write_hedges
from remediator.policy.hedge import hedge_incident
from remediator.policy_file import load_policy
from tests.policy.builders import T0, deployment, event, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import READY, STEPS, _name, _siblings, _start, _uid

POLICY = """
stuck_pod:
  checks: 3
  budgets: {engine_init: 600}
  progress: {enabled: true, factor: 1.5, floor_s: 120}  # the figures used here
  hedge: {enabled: %s, at: %g}
engine_logs: {follow: true}
guardrails:
  min_age: {factor: 0}
  cooldown: {seconds: 0}
  rate_limit: {per_minute: 600, burst: 100}
  hedge_budget: {max_percent: %g}
"""
STALL_AT = 62 + 120  # the KV cache sized at 62 s, then silence: stalled at the 120 s floor


def _run(
    enabled: bool = True, max_percent: float = 100, at: float = 1.0, leave: bool = False
) -> Run:
    policy = POLICY % ("true" if enabled else "false", at, max_percent)
    if leave:
        policy = policy.replace("hedge: {", "hedge: {leave_to_race: true, ")
    return make_run(policy)


def _acts(run: Run) -> list[str]:
    """What was done about pods (the unschedulable one's own notice left out)."""
    return [d.action for d in run.decisions if d.action != "notify"]


def _stalled(run: Run) -> float:
    """Pod 9 sizes its KV cache and goes quiet; returns when its container started."""
    return _start(run, 9, _siblings(run), STEPS[:6])


def test_a_stalled_pod_is_hedged_when_it_stalls_and_deleted_when_it_is_hung() -> None:
    run = _run()
    started = _stalled(run)
    run.at(T0 + started + STALL_AT - 1)
    assert run.decisions == []
    run.at(T0 + started + 600)
    hedge, delete = run.decisions
    assert (hedge.action, hedge.target, hedge.uid) == ("hedge-pod", _name(9), _uid(9))
    assert hedge.at - T0 == started + STALL_AT  # at the stall, 2 checks before the delete
    assert hedge.workload == "llm/Deployment/vllm-70b"
    assert hedge.incident == hedge_incident(_uid(9))
    assert hedge.param("timeout") == "1800"
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs) for 120s" in hedge.reason
    assert "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 38s there" in hedge.reason
    assert "the first Ready of the two serves, the other is deleted" in hedge.reason
    # What the hedge budget weighs: the pod's GPUs, and (in the guard state) the siblings'
    # GPU-seconds (2 GPUs each, scheduled 1 s after creation, Ready 10 + 110 s after: 119 s)
    # less the hedge's charge (2 GPUs for an expected cold start).
    assert hedge.gpus == 2
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    assert budget.paid == pytest.approx(5 * 2 * (READY + 10 - 1))
    assert budget.spent == pytest.approx(2 * hedge.expected_cold_start_s)
    assert (delete.action, delete.target) == ("delete-pod", _name(9))
    assert delete.at - T0 == started + STALL_AT + 20


@pytest.mark.parametrize("at", [0.5, 0.75])
def test_a_hedge_may_start_before_the_stall_and_the_delete_still_waits_for_it(at: float) -> None:
    run = _run(at=at)
    started = _stalled(run)
    hedge_at = 62 + at * 120  # the KV cache sized at 62 s; `at` of the 120 s floor
    run.at(T0 + started + hedge_at - 1)
    assert run.decisions == []
    run.at(T0 + started + 600)
    hedge, delete = run.decisions
    assert (hedge.action, hedge.at - T0) == ("hedge-pod", started + hedge_at)
    assert f"for {at * 120:.0f}s, past {at:g} of its 120s stall limit" in hedge.reason
    # A hedge beats nothing that is not beaten; the deletion is the stall's, as without it.
    assert (delete.action, delete.at - T0) == ("delete-pod", started + STALL_AT + 20)


def test_a_hedged_pod_s_end_settles_the_hedge_s_charge() -> None:
    """The stalled pod becomes Ready 30 s after its hedge went (it won): the engine tells the
    guard its stall ended, and the hedge is charged its 2 GPUs for those 30 s and the slack
    instead of a whole expected cold start."""
    run = _run()
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 1)
    (hedge,) = run.decisions
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    assert budget.spent == pytest.approx(2 * hedge.expected_cold_start_s)
    assert [o[0] for o in budget.open] == [_uid(9)]
    # What on-call sees of it (serve's /metrics; a Kafka worker's where it holds the guard).
    registry = CollectorRegistry()
    registry.register(HedgeBudgetGauges(lambda: [(run.session.guard, run.session.now)]))

    def gauge(what: str) -> float | None:
        return registry.get_sample_value("remediator_hedge_budget_gpu_seconds", {"what": what})

    assert (gauge("spent"), gauge("paid")) == (budget.spent, budget.paid)
    assert gauge("allowed") == budget.paid  # (max_percent 100 here)
    assert registry.get_sample_value("remediator_hedges_unsettled") == 1
    won = T0 + started + STALL_AT + 30
    run.feed(pod(_name(9), _uid(9), created=started - 10, scheduled=started - 9,
                 started=started, ready=won - T0))  # fmt: skip
    run.at(won + 1)
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    assert budget.spent == pytest.approx(2 * (30 + SETTLE_SLACK_S))
    assert budget.open == ()
    assert gauge("spent") == budget.spent
    assert registry.get_sample_value("remediator_hedges_unsettled") == 0


def test_a_hedged_pod_deleted_settles_its_hedge_to_the_deletion() -> None:
    """The stalled pod deleted 40 s after its hedge went (hung, or beaten by its hedge pod):
    the hedge pod is its replacement from then on, so the hedge is charged its 2 GPUs for
    those 40 s alone. Its own cold start held its GPUs all the same, scheduled to its
    deletion: it pays beside the siblings' (the cold-start GPU-minutes the budget is a
    share of)."""
    run = _run()
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 1)
    (hedge,) = run.decisions
    gone = T0 + started + STALL_AT + 40
    run.at(gone)
    run.feed(pod(_name(9), _uid(9), watch="DELETED", created=started - 10,
                 scheduled=started - 9, started=started))  # fmt: skip
    run.at(gone + 1)
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    assert budget.open == ()
    assert budget.spent == pytest.approx(2 * (gone - hedge.at), abs=2 * 1.0)
    its_own = 2 * (gone - (T0 + started - 9))
    assert budget.paid == pytest.approx(5 * 2 * (READY + 10 - 1) + its_own)


def test_off_by_default_the_stall_is_only_deleted() -> None:
    run = _run(enabled=False)
    started = _stalled(run)
    run.at(T0 + started + 600)
    assert [(d.action, d.at - T0) for d in run.decisions] == [
        ("delete-pod", started + STALL_AT + 20)
    ]
    # Nothing heard of GPUs when off: the guard state has no hedge budget.
    assert run.session.guard_state.of("hedge_budget", HedgeBudgetState) == HedgeBudgetState()


def test_no_hedge_once_the_api_server_started() -> None:
    """Its engine is up, only the readiness probe is left: a second pod of the same spec would
    wait on it as long. Still judged, and deleted when hung."""
    run = _run()
    started = _start(run, 9, _siblings(run), STEPS)
    run.at(T0 + started + 600)
    (delete,) = run.decisions
    assert delete.action == "delete-pod" and delete.target == _name(9)
    assert "stalled in vLLM step api_server" in delete.reason


def test_one_hedge_per_pod_even_when_it_stalls_again() -> None:
    """It ends a step after the hedge, then stalls in the next: it is not hedged twice."""
    run = _run()
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 5)
    assert [d.action for d in run.decisions] == ["hedge-pod"]
    graphs = STEPS[6][1]  # "Graph capturing finished": it moved on
    from tests.data import vllm_logs

    run.feed(vllm_logs.engine_log("llm", _name(9), graphs, T0 + started + STALL_AT + 10))
    run.at(T0 + started + 1200)
    assert [d.action for d in run.decisions] == ["hedge-pod", "delete-pod"]


ROLLING = {  # what the Deployment's watch said last, and whether the step would surge it
    "rolling out": ({"generation": 2, "pods": 5, "updated": 1}, "is rolling out"),
    "not observed yet": ({"generation": 2, "observed": 1, "pods": 4, "updated": 4}, "has a change"),
    "paused": ({"generation": 2, "pods": 4, "updated": 4, "paused": True}, "is paused"),
}


@pytest.mark.parametrize("state", sorted(ROLLING))
def test_no_hedge_is_decided_for_a_deployment_the_step_would_refuse(state: str) -> None:
    """Mid-rollout the Deployment controller spreads a surge over its ReplicaSets, so the
    step refuses it (exit 3). Decided anyway, the hedge spent a blast-radius slot, a rate-limit
    token and the hedge budget for nothing (in the simulator: most of the tuned fleet's
    slowest replicas). The engine says why instead, and the pod is deleted when hung."""
    run = _run()
    started = _stalled(run)
    status, why = ROLLING[state]
    run.feed(deployment("vllm/vllm-openai:v0.6.3", at=started, **status))  # type: ignore[arg-type]
    run.at(T0 + started + 600)
    assert _acts(run) == ["delete-pod"] and run.held == []
    (note,) = [n for n in run.notes if n.rule == "hedge"]
    assert note.reason.startswith(f"no hedge: llm/Deployment/vllm-70b {why}")


def test_a_deployment_done_rolling_out_is_hedged_again() -> None:
    run = _run()
    started = _stalled(run)
    image = "vllm/vllm-openai:v0.6.3"
    run.feed(deployment(image, generation=2, pods=5, updated=1, at=started))
    run.feed(deployment(image, generation=2, pods=4, updated=4, at=started + 1))
    run.at(T0 + started + 600)
    assert _acts(run) == ["hedge-pod", "delete-pod"]


def test_no_hedge_where_the_workload_is_short_of_gpus() -> None:
    """A pod of the workload was unschedulable for nvidia.com/gpu a minute before the stall:
    the guard holds the hedge (it would queue behind real demand) and says why; the stall
    still ends in the delete when hung."""
    run = _run()
    created = _siblings(run)
    short = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    run.feed(pod(_name(20), _uid(20), created=created, unschedulable=short))
    started = _start(run, 9, created + 100, STEPS[:6])
    run.at(T0 + started + 600)
    assert _acts(run) == ["delete-pod"]
    (held,) = run.held
    assert (held.decision.action, held.decision.target) == ("hedge-pod", _name(9))
    assert (held.guardrail, held.retry_at) == ("hedge_budget", None)
    assert "no hedge: llm/Deployment/vllm-70b is short of GPUs" in held.reason
    assert "unschedulable for nvidia.com/gpu" in held.reason
    assert "within 600s" in held.reason


def test_a_failed_scheduling_event_marks_the_workload_short_too() -> None:
    run = _run()
    created = _siblings(run)
    run.feed(pod(_name(21), _uid(21), created=created))
    msg = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes"
    run.feed(event("FailedScheduling", msg, created + 1, pod_name=_name(21), uid=_uid(21)))
    started = _start(run, 9, created + 100, STEPS[:6])
    run.at(T0 + started + 600)
    assert _acts(run) == ["delete-pod"]
    assert any("short of GPUs" in h.reason for h in run.held)


def test_gpus_short_long_ago_do_not_hold_a_hedge() -> None:
    run = _run()
    short = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    run.feed(pod(_name(20), _uid(20), created=0.0, unschedulable=short))
    run.feed(pod(_name(20), _uid(20), watch="DELETED", created=0.0, unschedulable=short))
    started = _stalled(run)  # 5000 s later: past gpu_short_s (600 s)
    run.at(T0 + started + 600)
    assert [d.action for d in run.decisions] == ["hedge-pod", "delete-pod"]


def test_the_hedge_budget_holds_a_hedge_the_fleet_has_not_paid_for() -> None:
    """By default hedges may take 5% of cold starts' GPU-minutes: five siblings (1190 GPU-s)
    pay 60 GPU-s, and a hedge is charged a whole expected cold start of 2 GPUs."""
    run = _run(max_percent=5)
    started = _stalled(run)
    run.at(T0 + started + 600)
    assert [d.action for d in run.decisions] == ["delete-pod"]
    (held,) = run.held
    assert (held.decision.action, held.guardrail) == ("hedge-pod", "hedge_budget")
    assert "would exceed 5% of 19.8 GPU-min of cold starts (1.0 GPU-min)" in held.reason


def test_a_second_hedge_of_the_pod_after_a_restart_is_held() -> None:
    """serve restarts mid-hedge: its engine forgot the hedge, the stored guard state did not.
    The same stall decides the same hedge again; idempotency holds it (and dedup behind it)."""
    first = _run()
    started = _stalled(first)
    first.at(T0 + started + STALL_AT + 1)
    assert [d.action for d in first.decisions] == ["hedge-pod"]
    stored = first.session.guard_state.to_json()

    again = _run()
    again.session.restore_guard_state(stored)
    assert _stalled(again) == started
    again.at(T0 + started + 600)
    assert [d.action for d in again.decisions] == ["delete-pod"]
    (held,) = again.held
    assert (held.decision.action, held.guardrail) == ("hedge-pod", "idempotency")
    assert held.retry_at is None


def test_hedging_needs_progress() -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy("stuck_pod:\n  progress: {enabled: false}\n  hedge: {enabled: true}\n")
    assert caught.value.path == "stuck_pod.hedge.enabled"
    assert "progress.enabled" in str(caught.value)


def test_the_hedge_timeout_is_bounded_by_the_workflow() -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy("stuck_pod:\n  hedge: {timeout_s: 7200}\n")
    assert caught.value.path == "stuck_pod.hedge.timeout_s"
    assert load_policy("stuck_pod:\n  hedge: {timeout_s: 600}\n").rules.stuck_pod.hedge == (
        load_policy("stuck_pod:\n  hedge: {timeout_s: 600}\n").rules.stuck_pod.hedge
    )


def test_hedge_knobs_parse_strictly() -> None:
    cfg = load_policy(
        "stuck_pod:\n  progress: {enabled: true}\n"
        "  hedge: {enabled: true, gpu_short_s: 300, timeout_s: 900}\n"
    ).rules.stuck_pod.hedge
    assert (cfg.enabled, cfg.gpu_short_s, cfg.timeout_s) == (True, 300.0, 900.0)
    with pytest.raises(ConfigError) as caught:
        load_policy("stuck_pod:\n  hedge: {surge: 2}\n")
    assert caught.value.path == "stuck_pod.hedge.surge"
    for bad in ("0", "1.5", "-0.5", "true", "'half'"):
        with pytest.raises(ConfigError) as caught:
            load_policy(f"stuck_pod:\n  hedge: {{at: {bad}}}\n")
        assert caught.value.path == "stuck_pod.hedge.at", bad
    assert load_policy("stuck_pod:\n  hedge: {at: 0.6}\n").rules.stuck_pod.hedge.at == 0.6
    assert cfg.leave_to_race is False  # (by simulation: docs/hedging.md)
    on = load_policy("stuck_pod:\n  hedge: {leave_to_race: true}\n").rules.stuck_pod.hedge
    assert on.leave_to_race is True
    with pytest.raises(ConfigError) as caught:
        load_policy("stuck_pod:\n  hedge: {leave_to_race: 1}\n")
    assert caught.value.path == "stuck_pod.hedge.leave_to_race"


IMAGE = "vllm/vllm-openai:v0.6.3"
RACER = "uid-of-the-hedge-pod"


def _hedge_runs(run: Run, at: float, **changes: object) -> None:
    """The hedge step's annotation on the Deployment, as its watch says it at `at` (seconds
    after T0): it hedges pod 9, the hedge pod has a node and races it, for 1800 s; and pod 8,
    whose hedge pod waits for a node."""
    fields: dict[str, object] = {
        "pod": _name(9),
        "uid": _uid(9),
        "replicas": 4,
        "before": tuple(_uid(i) for i in range(10)),
        "deadline": T0 + at + 1800,
        "racing": RACER,
    }
    note = Hedge(**{**fields, **changes})  # type: ignore[arg-type]
    other = replace(note, pod=_name(8), uid=_uid(8), racing=None)
    run.feed(deployment(IMAGE, at=at, annotations={HEDGE: write_hedges((other, note))}))


def test_a_stalled_pod_its_hedge_races_is_left_to_the_hedge() -> None:
    """Deleted for its stall, it would gain its replica nothing (the hedge pod is its
    replacement already) and may be healthy and slow: the hedge ends the race. Said once;
    once no pod races it (the hedge ended without a winner), deleted at the next check.
    (`hedge.leave_to_race`, off by default.)"""
    run = _run(leave=True)
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 1)
    _hedge_runs(run, started + STALL_AT + 5)
    run.at(T0 + started + 900)
    assert _acts(run) == ["hedge-pod"]
    (left,) = [n for n in run.notes if "not deleted" in n.reason]
    assert left.rule == "hedge" and left.subject == f"llm/{_name(9)}"
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs)" in left.reason
    assert f"its hedge runs: new pod {RACER} races it, the first Ready of the two wins" in (
        left.reason
    )
    run.feed(deployment(IMAGE, at=started + 1000))  # the annotation gone: the hedge ended
    run.at(T0 + started + 1100)
    assert _acts(run) == ["hedge-pod", "delete-pod"]
    assert started + 1000 <= run.decisions[-1].at - T0 <= started + 1010


@pytest.mark.parametrize("said", [True, False])
def test_a_won_hedge_is_charged_from_its_racer_s_node_to_the_racer_s_end(said: bool) -> None:
    """What the hedge held beside its stalled pod: its new pod's GPUs from its scheduling as
    the step's annotation says (the workflow's start and the wait for a node held nothing),
    or where it does not say (a release before), from when the annotation named its racer,
    less the step's poll; to the stalled pod's Ready; and then to the racer's own end
    (deleted as the loser), which its decider tells, sooner than the slack allows."""
    run = _run()
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 1)
    (hedge,) = run.decisions
    raced = started + STALL_AT + 20
    run.feed(pod("the-hedge-pod", RACER, created=raced - 3, scheduled=raced - 1))
    _hedge_runs(run, raced, racing_since=T0 + raced - 1 if said else None)
    won = raced + 10
    run.feed(pod(_name(9), _uid(9), created=started - 10, scheduled=started - 9,
                 started=started, ready=won))  # fmt: skip
    run.at(T0 + won + 1)
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    from_ = T0 + raced - (1 if said else RACED_SLACK_S)
    assert from_ > hedge.at
    assert budget.spent == pytest.approx(2 * (T0 + won - from_ + SETTLE_SLACK_S))
    assert [w[0] for w in budget.won] == [_uid(9)]
    gone = won + 8
    run.at(T0 + gone)
    run.feed(pod("the-hedge-pod", RACER, watch="DELETED", created=raced - 3, scheduled=raced - 1))
    run.at(T0 + gone + 1)
    budget = run.session.guard_state.of("hedge_budget", HedgeBudgetState)
    assert budget.spent == pytest.approx(2 * (T0 + gone - from_))
    assert budget.won == ()


NO_RACE: dict[str, tuple[dict[str, object], bool]] = {
    "its hedge pod has no node yet": ({"racing": None}, True),
    "the hedge is another pod's": ({"uid": "uid-of-another-pod", "pod": "another-pod"}, True),
    "the hedge is past its deadline": ({"deadline": T0}, True),
    "leave_to_race is off (the default)": ({}, False),
}


@pytest.mark.parametrize("case", sorted(NO_RACE))
def test_a_stalled_pod_nothing_races_is_deleted_as_ever(case: str) -> None:
    """A hedge pod waiting for a node may wait for the GPUs the stalled pod holds: without a
    racer, the stall deletes it as it would with no hedge at all."""
    changes, leave = NO_RACE[case]
    run = _run(leave=leave)
    started = _stalled(run)
    run.at(T0 + started + STALL_AT + 1)
    _hedge_runs(run, started + STALL_AT + 5, **changes)
    run.at(T0 + started + 900)
    assert [(d.action, d.at - T0) for d in run.decisions] == [
        ("hedge-pod", started + STALL_AT),
        ("delete-pod", started + STALL_AT + 20),
    ]
    assert not [n for n in run.notes if "not deleted" in n.reason]


def _races_a_hedge(run: Run, at: float) -> None:
    """Pod 9 is the new pod racing another pod's hedge, as the step's annotation says."""
    _hedge_runs(run, at, pod="the-stalled-pod", uid="uid-of-the-stalled-pod", racing=_uid(9))


def test_a_racer_that_stalls_is_hedged_once_the_hedge_it_races_has_ended() -> None:
    """Both pods of a replica stalled: it has two places taken already (the step would start
    a third pod, the simulator's refuses). It waits, said once, and is hedged as soon as the
    annotation says the hedge it races has ended (its stalled pod deleted for its hang): the
    replica's next pod starts then, not after the racer's own hang as well."""
    run = _run()
    started = _stalled(run)
    _races_a_hedge(run, started + 100)
    run.at(T0 + started + STALL_AT + 5)
    assert _acts(run) == []
    (waits,) = [n for n in run.notes if "no hedge yet" in n.reason]
    assert waits.rule == "hedge" and waits.subject == f"llm/{_name(9)}"
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs) for 120s" in waits.reason
    assert "it races the hedge of the-stalled-pod" in waits.reason
    ended = started + STALL_AT + 7
    run.feed(deployment(IMAGE, at=ended))  # the stalled pod gone: the step ended its hedge
    run.at(T0 + started + STALL_AT + 19)
    (hedge,) = run.decisions
    assert (hedge.action, hedge.uid) == ("hedge-pod", _uid(9))
    assert hedge.at - T0 == ended  # as the annotation said so, not at its next check
    run.at(T0 + started + 600)
    assert _acts(run) == ["hedge-pod", "delete-pod"]  # hung: deleted at its stall's end
    assert run.decisions[-1].at - T0 == started + STALL_AT + 20
    assert len([n for n in run.notes if "no hedge yet" in n.reason]) == 1


def test_a_racer_still_racing_when_hung_is_deleted_as_ever() -> None:
    run = _run()
    started = _stalled(run)
    _races_a_hedge(run, started + 100)
    run.at(T0 + started + 900)
    assert [(d.action, d.at - T0) for d in run.decisions] == [
        ("delete-pod", started + STALL_AT + 20)
    ]


def test_a_racer_of_a_hedge_past_its_deadline_is_hedged_at_its_stall() -> None:
    """The step ends a hedge at its deadline: a racer is not kept waiting on a stale entry."""
    run = _run()
    started = _stalled(run)
    _hedge_runs(run, started + 100, pod="the-stalled-pod", uid="uid-of-the-stalled-pod",
                racing=_uid(9), deadline=T0 + started + STALL_AT - 1)  # fmt: skip
    run.at(T0 + started + STALL_AT + 1)
    assert [(d.action, d.at - T0) for d in run.decisions] == [("hedge-pod", started + STALL_AT)]
