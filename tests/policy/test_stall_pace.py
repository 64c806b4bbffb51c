"""A pod's pace widens its stall limit: one that has run slow so far (a slow node) runs as slow
in the stretch it is in, and is not deleted for it. Real vLLM lines (tests/data/vllm_logs) at
made-up times on one pod, as in test_stall.py; the siblings' times are given."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.policy.config import ProgressConfig
from remediator.policy.history import PhaseHistory, few_samples_margin
from remediator.policy.pace import MAX_PACE, NODE, OWN, PACE_FROM, NodePaces, pace_of
from remediator.policy.stall import stall_of
from remediator.timeline.engine_steps import BEFORE_FIRST_STEP
from tests.policy.test_stall import STARTED, V0_WEIGHTS, _history, _line, _pod
from tests.timeline.streams import MODEL

CFG = ProgressConfig(enabled=True, factor=2.0, floor_s=30.0)
FEW = few_samples_margin(5, 50)  # five siblings' times, of a window of 50
BANNER = _line("2024-05-v0.4.2-kv-cache.log", "Initializing an LLM engine")
LOAD = _line("2025-04-v0.7-v0-profiling.log", "Starting to load model")


def _siblings() -> PhaseHistory:
    # From the container's start: 10 s to the first step line, 40 s to the weights in; then
    # 60 s of profiling memory.
    return _history(before_first_step=10, weights=40, memory_profiling=60)


def _after_weights(weights_s: float) -> float:
    """The stall limit in memory_profiling of a pod whose weights were in `weights_s` after
    its container started."""
    stall = stall_of(_pod([(STARTED + weights_s, V0_WEIGHTS)]), CFG, _siblings())
    assert stall is not None and stall.step == "memory_profiling"
    return stall.limit


UNPACED = 2.0 * FEW * 60  # 184.8 s


def test_a_pod_at_its_siblings_pace_keeps_its_limit() -> None:
    assert _after_weights(40) == pytest.approx(UNPACED)
    assert _after_weights(50) == pytest.approx(UNPACED)  # 80 over 70: under PACE_FROM


def test_a_pod_three_times_as_slow_so_far_gets_a_limit_as_much_wider() -> None:
    """Its weights in at 150 s, its siblings' at 40: (150 + 30) over (40 + 30), the floor's
    worth of the siblings' pace counted in: 2.57 times."""
    pace = (150 + 30) / (40 + 30)
    assert pace >= PACE_FROM
    t = _pod([(STARTED + 150, V0_WEIGHTS)])
    stall = stall_of(t, CFG, _siblings())
    assert stall is not None
    assert stall.pace == pytest.approx(pace)
    assert stall.limit == pytest.approx(UNPACED * pace)
    # a hedge is timed by the widened limit too: the budget is not spent on slow, moving pods
    assert stall.hedge_due(0.5) == pytest.approx(stall.began + 0.5 * UNPACED * pace)
    reason = stall.reason(CFG, MODEL, 3, stall.began + stall.limit + 20)
    assert f"limit {2 * FEW * pace:.3g}× that, widened {pace:.3g}× by its own pace" in reason


def test_a_slow_pod_whose_one_ended_step_drew_fast_is_widened_still() -> None:
    """A pod 3× slow whose weights happened to go fast (1.8× its siblings': 72 s against 40)
    shows (72 + 30) / (40 + 30) = 1.46 with the floor counted in; judged unwidened, a
    healthy pod was deleted in bench_random_fleets.py's fleet 346 (policy/pace.py)."""
    pace = (72 + 30) / (40 + 30)
    assert pace < 1.5
    assert _after_weights(72) == pytest.approx(UNPACED * pace)


def test_the_widening_stops_at_max_pace() -> None:
    assert _after_weights(1000) == pytest.approx(UNPACED * MAX_PACE)


def test_before_its_weights_the_stretch_to_its_first_step_line_tells_its_pace() -> None:
    """Banner, then its first step line 100 s after its container started (siblings: 10 s):
    it loads its weights judged at (100 + 30) / (10 + 30) = 3.25 times the siblings' limit."""
    t = _pod([(STARTED + 2, BANNER), (STARTED + 100, LOAD)])
    stall = stall_of(t, CFG, _siblings())
    assert stall is not None and stall.step == "weights"
    assert stall.pace == pytest.approx(130 / 40)
    assert stall.limit == pytest.approx(2 * FEW * 40 * 130 / 40)


def test_before_its_first_step_line_the_stretch_to_its_banner_tells_its_pace() -> None:
    """Banner only, 95 s after its container started (siblings: 5 s): NCCL init is judged at
    (95 + 30) / (5 + 30) = 3.57 times the siblings' limit; a banner at 10 s, (10 + 30) / 35 =
    1.14, widens nothing. Found by random fleets 1645 and 3410 (bench_random_fleets.py:
    untuned, first wave, a GPU node 3× slow): a healthy pod's banner came at 148 s and 159 s
    against its siblings' ~35 s, and it was deleted before its first step line."""
    history = _history(to_banner=5, before_first_step=10, weights=40)
    unpaced = max(CFG.floor_s, 2 * 1.5 * FEW * 10)
    slow = stall_of(_pod([(STARTED + 95, BANNER)]), CFG, history)
    assert slow is not None and slow.timed_as == BEFORE_FIRST_STEP
    assert (slow.pace, slow.paced_by) == (pytest.approx(125 / 35), OWN)
    assert slow.limit == pytest.approx(unpaced * 125 / 35)
    usual = stall_of(_pod([(STARTED + 10, BANNER)]), CFG, history)
    assert usual is not None and usual.pace == 1.0 and usual.limit == pytest.approx(unpaced)


def test_a_short_stretch_slow_by_seconds_widens_nothing() -> None:
    """20 s to the first step line against 10 s: twice, but 10 s beside a 30 s floor, (20 +
    30) / (10 + 30) = 1.25, under PACE_FROM."""
    assert PACE_FROM > (20 + 30) / (10 + 30)
    t = _pod([(STARTED + 2, BANNER), (STARTED + 20, LOAD)])
    stall = stall_of(t, CFG, _siblings())
    assert stall is not None and stall.pace == 1.0
    assert stall.limit == pytest.approx(2 * FEW * 40)


def test_stretches_no_sibling_timed_tell_no_pace() -> None:
    t = _pod([(STARTED + 2, BANNER), (STARTED + 100, LOAD)])
    history = _history(weights=40)  # no sibling's banner seen: the first stretch untimed
    assert pace_of(t, CFG, history, MODEL, t.started_at()) == (1.0, "")
    stall = stall_of(t, CFG, history)
    assert stall is not None and stall.limit == pytest.approx(2 * FEW * 40)


@settings(max_examples=200, deadline=None)
@given(
    first=st.floats(0.5, 2000),
    weights=st.floats(0.5, 3000),
    siblings_first=st.floats(0.1, 500),
    siblings_weights=st.floats(0.1, 800),
    slower=st.floats(1.0, 10.0),
)
def test_pace_is_one_or_between_its_bounds_and_a_slower_pod_never_gets_less(
    first: float, weights: float, siblings_first: float, siblings_weights: float, slower: float
) -> None:
    history = _history(before_first_step=siblings_first, weights=siblings_weights,
                       memory_profiling=30)  # fmt: skip

    def pace(scale: float) -> float:
        lines = [(STARTED + 0.1, BANNER), (STARTED + scale * first, LOAD),
                 (STARTED + scale * (first + weights), V0_WEIGHTS)]  # fmt: skip
        t = _pod(lines)
        return pace_of(t, CFG, history, MODEL, t.started_at())[0]

    at, slow = pace(1.0), pace(slower)
    assert at == 1.0 or PACE_FROM <= at <= MAX_PACE
    assert slow >= at


def test_a_nodes_pace_is_the_lower_median_of_its_last_three_cold_starts() -> None:
    history = PhaseHistory(50)
    paces = NodePaces(history)
    assert paces.of("n1") == paces.of(None) == 1.0 and list(paces.known()) == []
    paces.learn("n1", 3.0)
    assert paces.of("n1") == 3.0 and list(paces.known()) == [("n1", 3.0)]
    paces.learn("n1", 1.2)
    assert paces.of("n1") == 1.2  # the lower of two: back at its siblings' pace
    for ratio in (1.0, 1.1, 4.0):
        paces.learn("n1", ratio)
    assert paces.of("n1") == 1.1  # the last three: 1.0, 1.1, 4.0
    # kept in the history, beside the models' phases: where it goes, they go
    assert NodePaces(history).of("n1") == 1.1 and history.count("node:n1", "engine_pace") == 5


def test_its_nodes_pace_counts_where_larger_before_and_after_it_ends_a_step() -> None:
    """After a step too (random fleets 628 and 2448: a pod on a node 2× slow whose weights
    had drawn at its siblings' pace was deleted mid-compile, its own pace 1.26)."""
    history = _siblings()
    node = NodePaces(history)
    early = _pod([(STARTED + 2, BANNER), (STARTED + 60, LOAD)])  # its own: 90 over 40, 2.25
    for _ in range(2):
        node.learn(early.node or "", 3.5)
    assert pace_of(early, CFG, history, MODEL, early.started_at(), node) == (3.5, NODE)
    banner_only = _pod([(STARTED + 2, BANNER)])
    assert pace_of(banner_only, CFG, history, MODEL, banner_only.started_at(), node) == (3.5, NODE)
    ended = _pod([(STARTED + 150, V0_WEIGHTS)])  # its weights in: 180 over 70, 2.57
    assert pace_of(ended, CFG, history, MODEL, ended.started_at(), node) == (3.5, NODE)
    ended_slower = _pod([(STARTED + 220, V0_WEIGHTS)])  # 250 over 70: 3.57, its own
    assert pace_of(ended_slower, CFG, history, MODEL, ended_slower.started_at(), node) == (
        pytest.approx(250 / 70),
        OWN,
    )
    slow_own = _pod([(STARTED + 400, V0_WEIGHTS)])  # 430 over 70: past MAX_PACE
    assert pace_of(slow_own, CFG, history, MODEL, slow_own.started_at(), node) == (MAX_PACE, OWN)
