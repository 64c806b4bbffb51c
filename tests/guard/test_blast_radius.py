from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision
from remediator.guard.blast_radius import (
    BlastRadius,
    BlastRadiusConfig,
    BlastRadiusState,
    healed_by,
    percent_cap,
    workload_cap,
    workload_key,
)
from remediator.guard.state import GuardState, StateError

from .factory import T0, make

# (every deletion counted for the whole window: the span by cold starts is tested below)
CONFIG = BlastRadiusConfig(
    max_pods=2, max_percent=25, window_s=600, max_pods_cluster=5, cold_starts=0
)
STAGE = BlastRadius(CONFIG)
VLLM = "ml/Deployment/vllm"


@pytest.mark.parametrize(
    ("max_percent", "replicas", "cap"),
    [
        (25, 8, 2),
        (25, 4, 1),
        (25, 10, 2),  # 2.5 rounds down
        (25, 2, 1),  # 0.5 rounds down to 0, but one is always allowed ...
        (25, 1, 1),
        (25, 0, 1),
        (25, None, 1),  # ... and unknown size allows one
        (0, 8, 0),  # ... unless the percentage is 0
        (100, 7, 7),
        (33, 3, 1),
        (50, 3, 1),
    ],
)
def test_percent_cap_rounds_down_but_allows_one(
    max_percent: float, replicas: int | None, cap: int
) -> None:
    assert percent_cap(max_percent, replicas) == cap


@pytest.mark.parametrize(
    ("max_pods", "replicas", "cap"), [(2, 100, 2), (2, 8, 2), (3, 8, 2), (0, 100, 0), (5, 4, 1)]
)
def test_workload_cap_is_the_smaller_of_both(max_pods: int, replicas: int, cap: int) -> None:
    config = BlastRadiusConfig(max_pods=max_pods, max_percent=25.0)
    assert workload_cap(config, replicas) == cap


def _deleted(*entries: tuple[str, float]) -> GuardState:
    return GuardState({"blast_radius": BlastRadiusState(tuple(entries))})


@pytest.mark.parametrize(
    ("history", "decision", "now", "reason"),
    [
        ((), make(), T0, None),
        (((VLLM, T0),), make(target="vllm-1"), T0 + 1, None),
        (
            ((VLLM, T0), (VLLM, T0 + 1)),
            make(target="vllm-2"),
            T0 + 2,
            "blast radius: 2 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 2 (max_pods 2, 25% of 8 replicas)",
        ),
        (
            ((VLLM, T0),),
            make(target="vllm-1", replicas=4),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 1 (max_pods 2, 25% of 4 replicas)",
        ),
        (
            ((VLLM, T0),),
            make(target="vllm-1", replicas=None),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 1 (max_pods 2, 25% of unknown replicas)",
        ),
        (((VLLM, T0), (VLLM, T0 + 1)), make(target="vllm-2"), T0 + 600, None),  # first one aged out
        (((VLLM, T0), (VLLM, T0 + 1)), make(workload="ml/Deployment/other"), T0 + 2, None),
        (
            tuple((f"ml/Deployment/w{i}", T0 + i) for i in range(5)),
            make(workload="ml/Deployment/w9"),
            T0 + 10,
            "blast radius: 5 pod deletion(s) or hedge(s) cluster-wide in the last 600s; "
            "cap 5 (max_pods_cluster)",
        ),
        (tuple((f"ml/Deployment/w{i}", T0 + i) for i in range(5)), make(), T0 + 600, None),
        # a pod with no owner on record counts as its own workload
        (
            (("ml/Pod/bare", T0),),
            make(target="bare", workload=None, replicas=None),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Pod/bare in the last 600s; "
            "cap 1 (max_pods 2, 25% of unknown replicas)",
        ),
        (((VLLM, T0), (VLLM, T0)), make(action="restart-warmup"), T0, None),
        (((VLLM, T0), (VLLM, T0)), make(action="notify"), T0, None),
    ],
)
def test_check(
    history: tuple[tuple[str, float], ...], decision: Decision, now: float, reason: str | None
) -> None:
    assert STAGE.check(decision, now, _deleted(*history)).reason == reason


def test_record_appends_and_drops_what_left_the_window() -> None:
    state = _deleted((VLLM, T0 - 600), (VLLM, T0 - 599))
    after = STAGE.record(make(workload="ml/Deployment/b"), T0, state)
    assert after.of("blast_radius", BlastRadiusState).deletions == (
        (VLLM, T0 - 599),
        ("ml/Deployment/b", T0),
    )


def test_record_ignores_other_actions() -> None:
    assert STAGE.record(make(action="restart-warmup"), T0, GuardState()) == GuardState()


def test_a_pod_hung_on_a_node_verified_unsettled_is_neither_capped_nor_counted() -> None:
    """The cause is known (the node's GPU memory) and the pod serves nothing: capped, its
    replacement, which lands on the same node, waited its turn behind every other."""
    full = _deleted((VLLM, T0), (VLLM, T0 + 1))
    on_bad_node = make(target="vllm-2", unsettled_node="gpu-node-3")
    assert STAGE.check(on_bad_node, T0 + 2, full).reason is None
    assert STAGE.record(on_bad_node, T0 + 2, full) == full  # nothing counted
    assert STAGE.check(make(target="vllm-3"), T0 + 2, full).reason is not None  # others are


def _replacement(stage: BlastRadius, workload: str, created: float) -> Decision:
    """A pod created at `created`, found stalled in a vLLM step its siblings got through."""
    target = f"vllm-r{created:.0f}"
    return make(target=target, workload=workload, pod_created_at=created, stalled="weights")


def test_a_replacement_s_deletion_goes_on_from_its_pod_s_and_counts_in_its_place() -> None:
    """A replica whose replacement hangs too is not held for the window behind its own first
    deletion: the cap is on the workload's replicas being remediated, each counted once."""
    stage = BlastRadius(
        BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=5, cold_starts=0)
    )
    state = stage.record(make(target="vllm-0"), T0, GuardState())  # counted: the cap is hit
    assert stage.check(make(target="vllm-1"), T0 + 60, state).reason is not None  # another pod
    replacement = _replacement(stage, VLLM, T0 + 5)  # created after that deletion
    assert stage.check(replacement, T0 + 60, state).reason is None
    state = stage.record(replacement, T0 + 60, state)
    br = state.of("blast_radius", BlastRadiusState)
    assert br.deletions == ((VLLM, T0), (VLLM, T0 + 60)) and br.replaced == ((VLLM, T0),)
    # each deletion is gone on from once: a second pod created after it is held ...
    second = _replacement(stage, VLLM, T0 + 6)
    assert stage.check(second, T0 + 61, state).reason == (
        "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s, "
        "and 1 of their replacements'; cap 1 (max_pods 1, 50% of 8 replicas)"
    )
    # ... and the replacement's own replacement goes on from the replacement's deletion
    assert stage.check(_replacement(stage, VLLM, T0 + 65), T0 + 120, state).reason is None


def test_a_hedge_and_a_pod_of_unknown_age_go_on_from_nothing() -> None:
    """Nor a pod judged by a phase budget alone: as slow as the pod it replaced, the budget
    may be too tight (a kill loop), not the pod hung."""
    stage = BlastRadius(
        BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=5, cold_starts=0)
    )
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    hedge = make(action="hedge-pod", target="vllm-1", pod_created_at=T0 + 5, stalled="weights")
    assert stage.check(hedge, T0 + 60, state).reason is not None
    by_budget = make(target="vllm-1", pod_created_at=T0 + 5)  # not found stalled
    assert stage.check(by_budget, T0 + 60, state).reason is not None
    unknown = make(target="vllm-1", pod_created_at=None, stalled="weights")
    assert stage.check(unknown, T0 + 60, state).reason is not None
    other = _replacement(stage, "ml/Deployment/other", T0 + 5)  # another workload's deletion
    full = stage.record(
        other, T0 + 1, stage.record(make(workload="ml/Deployment/other"), T0, state)
    )
    assert full.of("blast_radius", BlastRadiusState).replaced == (("ml/Deployment/other", T0),)


def test_the_cluster_wide_cap_counts_a_replacement_s_deletion_too() -> None:
    stage = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=2))
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    state = stage.record(_replacement(stage, VLLM, T0 + 5), T0 + 60, state)
    assert stage.check(_replacement(stage, VLLM, T0 + 65), T0 + 120, state).reason == (
        "blast radius: 2 pod deletion(s) or hedge(s) cluster-wide in the last 600s; "
        "cap 2 (max_pods_cluster)"
    )


def test_what_a_replacement_went_on_from_leaves_with_the_window() -> None:
    stage = BlastRadius(
        BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=5, cold_starts=0)
    )
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    state = stage.record(_replacement(stage, VLLM, T0 + 5), T0 + 60, state)
    later = stage.record(make(workload="ml/Deployment/b"), T0 + 600, state)
    br = later.of("blast_radius", BlastRadiusState)
    assert br.replaced == () and br.deletions == ((VLLM, T0 + 60), ("ml/Deployment/b", T0 + 600))


def test_the_state_round_trips_and_keeps_the_old_shape_while_nothing_went_on() -> None:
    state = BlastRadiusState(((VLLM, T0), (VLLM, T0 + 60)), {}, ((VLLM, T0),))
    doc = state.to_doc()
    assert doc == {"deletions": [[VLLM, T0], [VLLM, T0 + 60]], "replaced": [[VLLM, T0]]}
    assert BlastRadiusState.from_doc(doc, "blast_radius") == state
    # the release before reads only these keys: none other is written until one went on
    assert set(BlastRadiusState(((VLLM, T0),)).to_doc()) == {"deletions"}


@pytest.mark.parametrize("bad", [[[VLLM]], [["x", "y"]], "nope", [[VLLM, float("inf")]]])
def test_bad_replaced_rows_are_refused(bad: object) -> None:
    with pytest.raises(StateError, match="blast_radius.replaced"):
        BlastRadiusState.from_doc({"deletions": [], "replaced": bad}, "blast_radius")


@settings(max_examples=400, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from([0.0, 1.0, 20.0, 90.0, 400.0]),  # seconds since the last
            st.sampled_from([VLLM, "ml/Deployment/b"]),
            st.sampled_from([-1000.0, -30.0, -1.0, 0.0]),  # pod created, before now
            st.sampled_from(["delete-pod", "delete-pod", "hedge-pod"]),
            st.sampled_from(["weights", "weights", None]),  # found stalled, or by a budget
        ),
        max_size=40,
    ),
    cap=st.integers(1, 3),
)
def test_a_workload_s_deletions_of_pods_no_one_replaced_stay_within_its_cap(
    steps: list[tuple[float, str, float, str, str | None]], cap: int
) -> None:
    """Any stream: in every window, of a workload's let-through pods, those created before
    all of its earlier ones in the window (nobody's replacement) are within the cap; and a
    pod created after one of those that nothing went on from yet is never held by the cap."""
    config = BlastRadiusConfig(max_pods=cap, window_s=600, max_pods_cluster=1000, cold_starts=0)
    stage, state, now = BlastRadius(config), GuardState(), T0
    passed: list[tuple[Decision, float]] = []
    for n, (gap, workload, created, action, stalled) in enumerate(steps):
        now += gap
        d = make(
            action=action,
            workload=workload,
            pod_created_at=now + created,
            uid=f"u{n}",
            stalled=stalled,
        )
        free = [
            t for e, t in passed
            if workload_key(e) == workload and t <= now + created and now - t < 600
        ]  # fmt: skip
        verdict = stage.check(d, now, state)
        gone_on = state.of("blast_radius", BlastRadiusState).replaced
        if action == "delete-pod" and stalled and any((workload, t) not in gone_on for t in free):
            assert verdict.reason is None, "a replacement's deletion held by the cap"
        if verdict.reason is None:
            state = stage.record(d, now, state)
            passed.append((d, now))

    def replacement(i: int) -> bool:  # created after one of its workload's let through before
        d, t = passed[i]
        return (
            d.action == "delete-pod"
            and d.stalled is not None
            and any(
                workload_key(e) == workload_key(d)
                and t2 <= (d.pod_created_at or 0)
                and t - t2 < 600
                for e, t2 in passed[:i]
            )
        )

    for _, start in passed:
        for workload in (VLLM, "ml/Deployment/b"):
            window = [
                i for i, (d, t) in enumerate(passed)
                if workload_key(d) == workload and start <= t < start + 600
            ]  # fmt: skip
            assert len([i for i in window if not replacement(i)]) <= cap


def test_a_workload_s_deletion_counts_while_its_replacement_may_still_be_cold_starting() -> None:
    """For `cold_starts` (1) of its model's expected cold start, where that is shorter than the
    window: a tuned model's replica (a 60 s cold start) healed in a minute is no longer being
    remediated ten minutes on. In the simulator's random fleets with 20% of engine inits hung,
    workloads of two or three replicas (cap 1) held a second replica's hung pod ~600 s behind
    the first's deletion (bench/bench_random_fleets.py, fleets 106, 167, 259, 294, 314)."""
    stage = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=5))
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    tuned = make(target="vllm-1", expected_cold_start_s=60.0)
    assert stage.check(tuned, T0 + 59, state).reason == (
        "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 60s "
        "(1x its model's expected cold start, 60s); cap 1 (max_pods 1, 50% of 8 replicas)"
    )
    assert stage.check(tuned, T0 + 60, state).reason is None
    twice = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, cold_starts=2))
    assert twice.check(tuned, T0 + 119, state).reason is not None
    assert twice.check(tuned, T0 + 120, state).reason is None
    # a slow model's, or one whose cold start is unknown (none, or nonsense): the whole window
    for slow in (make(target="vllm-1", expected_cold_start_s=600.0),
                 make(target="vllm-1", expected_cold_start_s=None),
                 make(target="vllm-1", expected_cold_start_s=0.0)):  # fmt: skip
        assert stage.check(slow, T0 + 599, state).reason is not None
        assert stage.check(slow, T0 + 600, state).reason is None
    # with `cold_starts: 0`, the whole window for every model
    whole = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, cold_starts=0))
    assert whole.check(tuned, T0 + 599, state).reason is not None


def test_the_cluster_wide_cap_counts_the_whole_window_whatever_the_model() -> None:
    stage = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=2))
    state = stage.record(make(workload="ml/Deployment/a"), T0, GuardState())
    state = stage.record(make(workload="ml/Deployment/b"), T0 + 1, state)
    tuned = make(workload="ml/Deployment/c", expected_cold_start_s=10.0)
    assert stage.check(tuned, T0 + 500, state).reason == (
        "blast radius: 2 pod deletion(s) or hedge(s) cluster-wide in the last 600s; "
        "cap 2 (max_pods_cluster)"
    )


def test_a_deletion_stops_counting_once_a_pod_of_its_workload_created_after_it_is_ready() -> None:
    """Its replica is served again. In the simulator's random fleet 219 (20% of engine inits
    hung), a two-replica TP8 Deployment's second hung pod was held 338 s (its model's expected
    cold start, a GPU wait in it) behind the first's deletion, whose replacement was Ready
    in 40 s: P99 438 s against the seed rule's 338 s; 338 s once healed."""
    stage = BlastRadius(BlastRadiusConfig(max_pods=1, window_s=600, max_pods_cluster=5))
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    held = make(target="vllm-1", ready_created=(T0 - 300,))  # Ready, but created before it
    assert stage.check(held, T0 + 60, state).reason is not None
    same = make(target="vllm-1", ready_created=(T0,))  # created as it was counted: not after
    assert stage.check(same, T0 + 60, state).reason is not None
    healed = make(target="vllm-1", ready_created=(T0 - 300, T0 + 5))
    assert stage.check(healed, T0 + 60, state).reason is None


def test_each_ready_pod_heals_one_deletion_and_says_so() -> None:
    stage = BlastRadius(BlastRadiusConfig(max_pods=2, window_s=600, max_pods_cluster=50))
    state = GuardState()
    for i in range(3):  # three let through (as replacements' deletions may be, past the cap)
        state = stage.record(make(target=f"vllm-{i}", uid=f"u{i}"), T0 + i, state)
    one = make(target="vllm-9", ready_created=(T0 + 10,))
    assert stage.check(one, T0 + 60, state).reason == (
        "blast radius: 2 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 300s "
        "(1x its model's expected cold start, 300s) (1 more not counted: a pod of it created "
        "since is Ready); cap 2 (max_pods 2, 50% of 8 replicas)"
    )
    two = make(target="vllm-9", ready_created=(T0 + 10, T0 + 11))
    assert stage.check(two, T0 + 60, state).reason is None


def test_the_cluster_wide_cap_counts_a_healed_deletion_still() -> None:
    """The backstop against a policy wrong about every pod counts every deletion."""
    stage = BlastRadius(BlastRadiusConfig(max_pods=5, window_s=600, max_pods_cluster=2))
    state = stage.record(make(target="vllm-0"), T0, GuardState())
    state = stage.record(make(target="vllm-1"), T0 + 1, state)
    healed = make(target="vllm-2", ready_created=(T0 + 10, T0 + 11))
    assert stage.check(healed, T0 + 60, state).reason == (
        "blast radius: 2 pod deletion(s) or hedge(s) cluster-wide in the last 600s; "
        "cap 2 (max_pods_cluster)"
    )


def _most_matched(deletions: list[float], ready: list[float]) -> int:
    """The largest matching of deletions to pods created after them, by brute force."""
    if not deletions:
        return 0
    first, rest = deletions[0], deletions[1:]
    best = _most_matched(rest, ready)  # the first deletion left unmatched
    for i, created in enumerate(ready):
        if created > first:
            best = max(best, 1 + _most_matched(rest, ready[:i] + ready[i + 1 :]))
    return best


@settings(max_examples=300, deadline=None)
@given(
    deletions=st.lists(st.integers(0, 20).map(float), max_size=6),
    ready=st.lists(st.integers(0, 20).map(float), max_size=6),
)
def test_healed_by_is_the_most_deletions_one_pod_each_can_stand_for(
    deletions: list[float], ready: list[float]
) -> None:
    healed = healed_by(list(deletions), tuple(ready))
    assert healed == _most_matched(list(deletions), list(ready))
    assert healed_by(list(reversed(deletions)), tuple(reversed(ready))) == healed  # any order
