"""The guard's two tiers judged apart give what one pipeline gives (guard/pipeline.py): the
workload tier split by workload, each part admitting its workload's decisions in order, one at
a time, in any interleaving with the others; the cluster tier settling every workload's in time
order. What a runtime that partitions the guard by workload relies on."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import Candidate, GpuNews
from remediator.core.guard import Guard, Verdicts
from remediator.guard import GuardState, build_pipeline, engage, hold
from remediator.guard.blast_radius import BlastRadius, BlastRadiusConfig, workload_key
from remediator.guard.config import GuardConfig
from remediator.guard.dry_run import DryRun, DryRunConfig
from remediator.guard.hedge_budget import hear
from remediator.guard.pipeline import CLUSTER_STAGES, WORKLOAD_STAGES, Pipeline

from .factory import T0, make
from .test_properties import ACTIONS, configs

# A workload owns its pods and their incidents; a node's decisions have no workload.
WORKLOADS = ("a/Deployment/w0", "a/Deployment/w1", "b/StatefulSet/w2", None)
BROADCASTS = ("kill switch on", "kill switch off", "watch behind", "watch current")
Event = tuple[float, Decision | str]  # a decision, or what the runtime sets for every workload


@st.composite
def streams(draw: st.DrawFn) -> list[Event]:
    deltas = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 7.5, 30.0, 301.0]), max_size=50))
    out: list[Event] = []
    for i, now in enumerate(T0 + t for t in accumulate(deltas)):
        if draw(st.integers(0, 9)) == 0:
            out.append((now, draw(st.sampled_from(BROADCASTS))))
            continue
        w = draw(st.sampled_from(WORKLOADS))
        pod = f"{w or 'node'}-p{draw(st.integers(0, 3))}"
        action = draw(st.sampled_from(["delete-pod"] * 4 + ACTIONS))
        decision = make(
            action=action, target=pod, uid=f"uid-{pod}", workload=w, at=now,
            incident=f"{pod}-i{draw(st.integers(0, 2))}", reason=f"property {i}",
            replicas=None if w is None else draw(st.sampled_from([None, 2, 8])),
            pod_created_at=draw(st.sampled_from([T0 - 1000.0, now])),
            gpus=draw(st.sampled_from([2, None])),
        )  # fmt: skip
        out.append((now, decision))
    return out


def _broadcast(state: GuardState, what: str) -> GuardState:
    if what.startswith("kill switch"):
        return engage(state, what.endswith("on"))
    return hold(state, "relisting" if what.endswith("behind") else "")


def _fresh() -> GuardState:
    return hear(GuardState(), GpuNews(gpu_s=1e5), T0)  # some hedges paid for, not all


def one_pipeline(pipeline: Pipeline, stream: list[Event]) -> list[Decision | Suppressed]:
    state, out = _fresh(), []
    for now, item in stream:
        if isinstance(item, str):
            state = _broadcast(state, item)
            continue
        result, state = pipeline.run(item, now, state)
        out.append(result)
    return out


@dataclass
class Part:
    """One workload's part of the workload tier: its own state, its events in order."""

    events: list[tuple[int, float, Decision | str]]
    state: GuardState = field(default_factory=GuardState)
    waiting: tuple[int, float, Decision] | None = None  # admitted, not yet settled


def tiers_apart(
    pipeline: Pipeline, stream: list[Event], order: list[int]
) -> list[Decision | Suppressed]:
    """The same stream, the workload tier split by `workload_key`, the parts taking turns as
    `order` says (a part that cannot move passes its turn), the cluster tier settling the
    earliest admitted decision once no part may still admit an earlier one."""
    parts: dict[str, Part] = {}
    decisions = [item for _, item in stream if not isinstance(item, str)]
    for key in {workload_key(d) for d in decisions}:
        parts[key] = Part([])
    n = 0
    for now, item in stream:
        if isinstance(item, str):
            for part in parts.values():  # the runtime sets it for every part
                part.events.append((-1, now, item))
        else:
            parts[workload_key(item)].events.append((n, now, item))
            n += 1
    out: dict[int, Decision | Suppressed] = {}
    cluster, turns = _fresh(), iter(order)
    while len(out) < n:
        movable: list[Part | None] = [
            parts[k] for k in sorted(parts) if parts[k].waiting is None and parts[k].events
        ]
        ready = _next_to_settle(parts)
        options = movable + ([None] if ready is not None else [])
        assert options, "stuck: nothing may move"
        part = options[next(turns, 0) % len(options)]
        if part is None:
            assert ready is not None and ready.waiting is not None
            index, now, decision = ready.waiting
            result, cluster = pipeline.settle(decision, now, cluster)
            if not isinstance(result, Suppressed) or result.simulated:
                ready.state = pipeline.commit(decision, now, ready.state)
            out[index], ready.waiting = result, None
            continue
        index, now, item = part.events.pop(0)
        if isinstance(item, str):
            part.state = _broadcast(part.state, item)
            continue
        held, part.state = pipeline.admit(item, now, part.state)
        if held is not None:
            out[index] = held
        else:
            part.waiting = (index, now, item)
    return [out[i] for i in range(n)]


def _next_to_settle(parts: dict[str, Part]) -> Part | None:
    """The part whose admitted decision came first, if no part may still admit one that came
    before it (the watermark the cluster tier waits for; the stream's order is its time's)."""
    waiting = [(p.waiting[0], p) for p in parts.values() if p.waiting is not None]
    if not waiting:
        return None
    index, first = min(waiting, key=lambda w: w[0])
    for p in parts.values():
        ahead = next((e[0] for e in p.events if e[0] >= 0), None)  # its next decision
        if p.waiting is None and ahead is not None and ahead < index:
            return None
    return first


@settings(max_examples=300, deadline=None)
@given(config=configs, stream=streams(), order=st.lists(st.integers(0, 7), max_size=200))
def test_tiers_apart_judge_as_one_pipeline(
    config: GuardConfig, stream: list[Event], order: list[int]
) -> None:
    pipeline = build_pipeline(config)
    assert one_pipeline(pipeline, stream) == tiers_apart(pipeline, stream, order)


def test_a_stage_that_remembered_across_workloads_would_be_caught() -> None:
    """The check above can fail: with the cluster-wide caps in the workload tier, a second
    workload's deletion is judged without the first workload's."""
    wrong = Pipeline(
        (BlastRadius(BlastRadiusConfig(max_pods_cluster=1)),), workload_tier=1
    )  # fmt: skip
    stream: list[Event] = [
        (T0, make(workload="a/Deployment/w0", target="p0", incident="i0")),
        (T0 + 1, make(workload="a/Deployment/w1", target="p1", incident="i1", at=T0 + 1)),
    ]
    assert one_pipeline(wrong, stream) != tiers_apart(wrong, stream, [])


def test_the_tiers_are_the_stages_in_order() -> None:
    pipeline = build_pipeline()
    tier = pipeline.workload_tier
    assert pipeline.names[:tier] == tuple(cls.name for cls in WORKLOAD_STAGES)
    assert pipeline.names[tier:] == tuple(cls.name for cls in CLUSTER_STAGES)
    assert pipeline.names[-1] == "dry_run"  # simulates: after every stage of both tiers


def test_a_simulating_stage_in_the_workload_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="cluster tier"):
        Pipeline((DryRun(DryRunConfig(enabled=True)),), workload_tier=1)


# ---- the core's Guard, its two tiers held apart ---------------------------------------
def _candidate(decision: Decision, now: float) -> Candidate:
    return Candidate(decision, now, partition=len(decision.target) % 3,
                     model="meta-llama/Llama-3.1-70B-Instruct", phase="engine_init")  # fmt: skip


def _set(guard: Guard, what: str) -> None:
    if what.startswith("kill switch"):
        guard.set_kill_switch(what.endswith("on"))
    else:
        guard.set_behind("relisting" if what.endswith("behind") else None)


def _guard(config: GuardConfig, verdicts: Verdicts) -> Guard:
    guard = Guard(config, verdicts=verdicts)
    guard.hear(GpuNews(gpu_s=1e5), T0)  # some hedges paid for, not all
    return guard


def _counts(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for metric in registry.collect()
        for s in metric.samples
        if s.name.endswith("_total")
    }


@settings(max_examples=200, deadline=None)
@given(config=configs, dry=st.booleans(), stream=streams())
def test_guards_holding_the_tiers_apart_judge_and_feed_back_as_one_guard(
    config: GuardConfig, dry: bool, stream: list[Event]
) -> None:
    """A guard per workload for the first tier, one for the second: the same verdicts, the
    same feedback for the decider, the same pods held until old enough, the same counts."""
    config = config.with_stage("dry_run", DryRunConfig(enabled=dry))
    one_registry, apart_registry = CollectorRegistry(), CollectorRegistry()
    one = _guard(config, Verdicts(one_registry))
    verdicts = Verdicts(apart_registry)
    cluster = _guard(config, verdicts)
    parts: dict[str, Guard] = {}
    judged_once, judged_apart, said = [], [], []
    for now, item in stream:
        if isinstance(item, str):
            said.append(item)
            for guard in (one, *parts.values()):
                _set(guard, item)
            continue
        candidate = _candidate(item, now)
        judged_once.append(one.judge(candidate))
        part = parts.get(workload_key(item))
        if part is None:
            part = parts[workload_key(item)] = Guard(config, verdicts=verdicts)
            for what in said:  # what the runtime set before: every part has it
                _set(part, what)
        judged = part.admit(candidate, now)
        if judged is None:
            judged, through = cluster.settle(candidate, now)
            if through:
                part.commit(candidate, now)
        judged_apart.append(judged)
    assert judged_once == judged_apart
    assert [result for result, _ in judged_once] == one_pipeline(build_pipeline(config), stream)
    aging = {uid: held for part in parts.values() for uid, held in part.aging.items()}
    assert one.aging == aging
    assert _counts(one_registry) == _counts(apart_registry)
