"""A pod on a slow node (a throttled GPU, a slow local disk) runs every stretch of its engine
init slower than its siblings: judged by its siblings' times alone it would be deleted in
the first stretch longer than their limit. Its pace so far widens its limit (stall.pace_of):
it comes up untouched, and a hang there is still found. Real vLLM lines at made-up times, as
in test_progress_first_step.py."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from remediator.core.decider import node_pace_gauges
from remediator.policy.pace import MAX_PACE
from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import Run, make_run
from tests.policy.test_progress import READY, _name, _start, _uid
from tests.policy.test_progress_first_step import (
    BANNER,
    POLICY,
    WITH_BANNER,
    _deleted_after,
    _siblings,
)


def _slow(k: float) -> list[tuple[float, str]]:
    """The siblings' lines from a node whose engine inits take `k` times as long."""
    return [(k * at, line) for at, line in WITH_BANNER]


SLOW = 6.0


def test_a_pod_six_times_as_slow_everywhere_comes_up_untouched() -> None:
    """Its weights are in at 240 s, past the siblings' 185 s limit for them (3 × 1.54 × 40 s)
    and its two checks; its first step line at 30 s (siblings 5 s) widens that 1.71 times
    ((30 + 30) over (5 + 30)). Each stretch after is widened by its pace so far. Ready at
    660 s, over the 600 s phase budget too."""
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    started = _start(run, 9, created, _slow(SLOW))
    run.at(T0 + started + SLOW * READY - 1)
    assert run.decisions == []
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + SLOW * READY))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_a_hang_on_a_slow_node_is_still_found_and_the_reason_says_why_later() -> None:
    """Five times slow up to sizing its KV cache (310 s), then silent: the siblings' 37 s to
    graphs captured give a 171 s limit, widened by its pace so far, (310 + 30) over its
    siblings' (62 + 30): deleted two checks after 310 + 3.7 × 171 s."""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), _slow(5.0)[:7])
    run.at(T0 + started + 3600)
    pace = (310 + 30) / (62 + 30)
    assert _deleted_after(run, started) == pytest.approx(310 + pace * 3 * 1.54 * 37 + 20, rel=0.01)
    reason = run.decisions[0].reason
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs)" in reason
    assert f"widened {pace:.3g}× by its own pace so far against its siblings'" in reason


SLOW_NODE = "gpu-node-slow"


def _ready_on_slow_node(run: Run, created: float, paces: list[float]) -> float:
    """Healthy cold starts on SLOW_NODE one after the other, each `paces[i]` times as slow
    as their siblings."""
    for i, k in enumerate(paces, start=10):
        started = created + 10.0
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, node=SLOW_NODE))  # fmt: skip
        for at, line in _slow(k):
            run.feed(vllm_logs.engine_log("llm", _name(i), line, T0 + started + at))
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, ready=started + k * READY, node=SLOW_NODE))  # fmt: skip
        created += 1000.0
    assert run.decisions == []
    return created


def _hung_in_nccl_init(paces: list[float], node: str = SLOW_NODE) -> tuple[float, str]:
    """After five siblings and cold starts on SLOW_NODE at `paces`: when a pod on `node`
    whose banner is its last line is deleted, after its container's start, and why."""
    run = make_run(POLICY)
    created = _ready_on_slow_node(run, _siblings(run, WITH_BANNER), paces)
    started = created + 10.0
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 node=node))  # fmt: skip
    run.feed(vllm_logs.engine_log("llm", _name(9), BANNER[1], T0 + started + BANNER[0]))
    run.at(T0 + started + 3600)
    return _deleted_after(run, started), run.decisions[0].reason


@pytest.mark.parametrize("paces", [[SLOW], [SLOW, SLOW], [1.0, SLOW, SLOW]])
def test_before_its_first_step_line_a_pod_is_timed_by_its_nodes_pace(paces: list[float]) -> None:
    """Nothing it logged tells its pace yet; its node's last cold starts ran six times their
    siblings' (widening at most 4 times): a hang in NCCL init there is found after 4 times
    the limit it has on another node, and the reason says whose pace that is."""
    elsewhere, _ = _hung_in_nccl_init(paces, node="gpu-node-1")
    after, reason = _hung_in_nccl_init(paces)
    assert after - 20 == pytest.approx(MAX_PACE * (elsewhere - 20))
    assert "widened 4× by the pace of its node's last cold starts" in reason


@pytest.mark.parametrize("paces", [[SLOW, 1.0], [SLOW, 1.0, 1.0]])
def test_a_node_back_at_its_siblings_pace_widens_nothing(paces: list[float]) -> None:
    """One slow cold start, then one at the siblings' pace: the lower of the two counts."""
    elsewhere, _ = _hung_in_nccl_init(paces, node="gpu-node-1")
    after, reason = _hung_in_nccl_init(paces)
    assert after == elsewhere and "widened" not in reason


def test_each_nodes_pace_is_a_gauge() -> None:
    """remediator_node_engine_pace: the slow node's last two cold starts ran six times their
    siblings' (the floor's worth counted in: 4.9); the siblings' node 1: the sixth and the
    seventh were timed by the five before them (none had five before them: no pace)."""
    run = make_run(POLICY)
    _ready_on_slow_node(run, _siblings(run, WITH_BANNER, n=7), [SLOW, SLOW])
    registry = CollectorRegistry()
    registry.register(node_pace_gauges(lambda: [run.session.decider]))
    slow = registry.get_sample_value("remediator_node_engine_pace", {"node": SLOW_NODE})
    usual = registry.get_sample_value("remediator_node_engine_pace", {"node": "gpu-node-1"})
    assert usual == pytest.approx(1.0) and slow is not None and 4.5 < slow < 5.5


def test_a_nodes_pace_is_stored_and_restored_with_the_history() -> None:
    """What serve stores of what it learned (`Session.learned`), restored after a restart
    (or relayed to a Kafka worker's other partitions as `Learned`), brings the node's pace
    back with the models' phases."""
    before = make_run(POLICY, keeps_learned=True)
    _ready_on_slow_node(before, _siblings(before, WITH_BANNER), [SLOW, SLOW])
    pace = before.session.engine.node_paces.of(SLOW_NODE)
    assert pace > 4.0
    after = make_run(POLICY, keeps_learned=True)
    after.session.restore_learned(before.session.learned())
    assert after.session.engine.node_paces.of(SLOW_NODE) == pace


def _compile_beside(neighbour_node: str, compile_ends: float | None) -> Run:
    """Five siblings; then, on `neighbour_node`, a pod still starting three times as slow
    (through sizing its KV cache, no Ready yet); then one on SLOW_NODE whose banner and
    weights came at its siblings' pace and whose compile, 20 s for them, ends `compile_ends`
    seconds after its weights (None: never). Random fleets 628 and 2448 (one node 2× slow)
    lost such a pod mid-compile: its own pace said 1, and no cold start on its node had
    ended."""
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    started = created + 10.0
    for i, node, lines in ((10, neighbour_node, _slow(3.0)[:7]), (9, SLOW_NODE, WITH_BANNER)):
        run.feed(pod(_name(i), _uid(i), created=created, scheduled=created + 1,
                     started=started, node=node))  # fmt: skip
        for at, line in lines:
            if at > 40.0 and i == 9:  # (past its weights: its compile, then the rest)
                if compile_ends is None:
                    break
                at += compile_ends - 20.0
            run.feed(vllm_logs.engine_log("llm", _name(i), line, T0 + started + at))
    run.at(T0 + started + 40.0 + (compile_ends or 600.0) + 1.0)
    return run


def test_a_pod_beside_slow_pods_still_starting_is_timed_by_their_pace() -> None:
    """Its compile runs 150 s (7.5 times its siblings'), past its 92 s limit (3 × 1.54 ×
    20 s): beside a pod ending its steps at three times its siblings' pace on the same node,
    that limit is widened by the node's pace (2.3, the floor counted in) and it is not
    deleted; beside the same pod on another node, it is."""
    assert _compile_beside(SLOW_NODE, 150.0).decisions == []
    (deleted,) = _compile_beside("gpu-node-2", 150.0).decisions
    assert deleted.target == _name(9) and "stalled in vLLM step torch_compile" in deleted.reason


def test_a_hang_beside_slow_pods_is_still_found_and_the_reason_says_whose_pace() -> None:
    """Silent after its weights: deleted, its 92 s limit widened by its node's pace (2.3)."""
    run = _compile_beside(SLOW_NODE, None)
    (deleted,) = [d for d in run.decisions if d.target == _name(9)]
    assert deleted.stalled == "torch_compile" and "over its 214s limit" in deleted.reason
    assert "by the pace of its node's last cold starts" in deleted.reason
