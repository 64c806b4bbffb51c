"""Properties over any sequence of decisions: the caps hold, nothing raises."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import GpuNews
from remediator.guard import GuardState, build_pipeline, engage
from remediator.guard.blast_radius import BlastRadiusConfig, workload_cap, workload_key
from remediator.guard.config import GuardConfig
from remediator.guard.cooldown import CooldownConfig
from remediator.guard.dedup import DedupConfig
from remediator.guard.dry_run import DryRunConfig
from remediator.guard.hedge_budget import hear
from remediator.guard.min_age import MinAgeConfig
from remediator.guard.rate_limit import RateLimitConfig

from .factory import T0

ACTIONS = [
    "delete-pod", "restart-warmup", "verify-gpu-memory", "cordon-node", "notify", "hedge-pod"
]  # fmt: skip
COUNTED = ("delete-pod", "hedge-pod")  # what the blast radius counts
WORKLOADS = ["a/Deployment/w0", "a/Deployment/w1", "b/StatefulSet/w2", "b/Deployment/w3", None]
# Deletions weighted up, so the caps are reached often enough to be tested.
WEIGHTED = ["delete-pod"] * 4 + ACTIONS

configs = st.fixed_dictionaries(
    {
        "dedup": st.builds(DedupConfig, window_s=st.sampled_from([0.0, 30.0, 300.0])),
        "cooldown": st.builds(CooldownConfig, seconds=st.sampled_from([0.0, 20.0, 600.0])),
        "min_age": st.builds(MinAgeConfig, factor=st.sampled_from([0.0, 1.0])),
        "blast_radius": st.builds(
            BlastRadiusConfig,
            max_pods=st.integers(0, 4),
            max_percent=st.sampled_from([0.0, 10.0, 25.0, 50.0, 100.0]),
            window_s=st.sampled_from([0.0, 60.0, 600.0]),
            max_pods_cluster=st.integers(0, 6),
            cold_starts=st.sampled_from([0.0, 1.0, 2.0]),
        ),
        "rate_limit": st.builds(
            RateLimitConfig,
            per_minute=st.sampled_from([0.5, 6.0, 60.0, 600.0]),
            burst=st.integers(1, 5),
        ),
    }
).map(GuardConfig)


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict[str | None, int | None], list[tuple[Decision, float]]]:
    """Decisions at non-decreasing times; each workload keeps one replica count."""
    replicas: dict[str | None, int | None] = {
        w: draw(st.none() | st.integers(0, 12)) if w else None for w in WORKLOADS
    }
    deltas = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 7.5, 30.0, 301.0]), max_size=60))
    times = [T0 + t for t in accumulate(deltas)]
    out = []
    for now in times:
        workload = draw(st.sampled_from(WORKLOADS))
        decision = Decision(
            action=draw(st.sampled_from(WEIGHTED)),
            namespace=draw(st.sampled_from(["a", "b"])),
            target=f"p{draw(st.integers(0, 9))}",
            reason="property",
            incident=f"i{draw(st.integers(0, 30))}",
            at=now,
            workload=workload,
            pod_created_at=draw(st.sampled_from([T0 - 1000.0, T0 - 1000.0, None, now])),
            expected_cold_start_s=draw(st.sampled_from([300.0, 300.0, 45.0, 0.0, None])),
            replicas=replicas[workload],
            # a hedge's cost (hedge_budget; the fleet's cold starts pay plenty: `_let_through`)
            gpus=draw(st.sampled_from([2, 2, None])),
            stalled=draw(st.sampled_from([None, None, "weights"])),  # found stalled by its step
        )
        out.append((decision, now))
    return replicas, out


def _let_through(
    config: GuardConfig, decisions: list[tuple[Decision, float]]
) -> list[tuple[Decision, float]]:
    pipeline, passed = build_pipeline(config), []
    state = hear(GuardState(), GpuNews(gpu_s=1e9), T0)  # hedges paid for: other caps judge
    for decision, now in decisions:
        result, state = pipeline.run(decision, now, state)
        if not isinstance(result, Suppressed):
            passed.append((result, now))
    return passed


@settings(max_examples=300, deadline=None)
@given(config=configs, run=runs())
def test_pod_deletions_and_hedges_in_any_window_never_exceed_the_blast_radius(
    config: GuardConfig, run: tuple[dict[str | None, int | None], list[tuple[Decision, float]]]
) -> None:
    """Cluster-wide, every one counts in any window; per workload, every one but a
    replacement's deletion (a pod found stalled, created after one of its workload's in the
    window: it goes on from that one), each for its span: `cold_starts` of its model's
    expected cold start where that is known and shorter than the window."""
    replicas, decisions = run
    blast = config.of("blast_radius", BlastRadiusConfig)
    deleted = [(d, t) for d, t in _let_through(config, decisions) if d.action in COUNTED]

    def replacement(i: int) -> bool:
        d, at = deleted[i]
        created = d.pod_created_at
        return (
            d.action == "delete-pod"
            and d.stalled is not None
            and created is not None
            and any(
                workload_key(e) == workload_key(d) and t <= created and at - t < blast.window_s
                for e, t in deleted[:i]
            )
        )

    def span(d: Decision) -> float:
        cold = d.expected_cold_start_s
        if not blast.cold_starts or cold is None or cold <= 0:
            return blast.window_s
        return min(blast.window_s, blast.cold_starts * cold)

    for _, start in deleted:
        window = [i for i, (_, t) in enumerate(deleted) if start <= t < start + blast.window_s]
        assert len(window) <= blast.max_pods_cluster
    for i, (d, at) in enumerate(deleted):
        if replacement(i):
            continue
        key, since = workload_key(d), at - span(d)
        counted = [
            j for j, (e, t) in enumerate(deleted[: i + 1])
            if workload_key(e) == key and t > since and not replacement(j)
        ]  # fmt: skip
        assert len(counted) <= workload_cap(blast, replicas[d.workload])


@settings(max_examples=300, deadline=None)
@given(config=configs, run=runs())
def test_actions_never_exceed_burst_plus_rate_times_elapsed(
    config: GuardConfig, run: tuple[dict[str | None, int | None], list[tuple[Decision, float]]]
) -> None:
    rate = config.of("rate_limit", RateLimitConfig)
    acted = [t for d, t in _let_through(config, run[1]) if d.action != "notify"]
    for i, first in enumerate(acted):
        for j in range(i, len(acted)):
            allowed = rate.burst + rate.per_minute / 60 * (acted[j] - first)
            assert j - i + 1 <= allowed + 1e-9


@settings(max_examples=100, deadline=None)
@given(config=configs, run=runs())
def test_dry_run_and_kill_switch_let_only_notes_through(
    config: GuardConfig, run: tuple[dict[str | None, int | None], list[tuple[Decision, float]]]
) -> None:
    for dry, engaged in [(True, False), (False, True)]:
        pipeline = build_pipeline(GuardConfig({"dry_run": DryRunConfig(enabled=dry)}))
        state = engage(GuardState(), engaged)
        for decision, now in run[1]:
            result, state = pipeline.run(decision, now, state)
            assert isinstance(result, Suppressed) or result.action == "notify"


texts = st.text(max_size=20)
odd_floats = st.none() | st.floats(allow_nan=True, allow_infinity=True)
arbitrary = st.builds(
    Decision,
    action=st.sampled_from(ACTIONS),
    namespace=texts,
    target=texts,
    reason=texts,
    incident=texts,
    at=st.floats(),
    uid=st.none() | texts,
    workload=st.none() | texts,
    params=st.lists(st.tuples(texts, texts), max_size=3).map(tuple),
    pod_created_at=odd_floats,
    expected_cold_start_s=odd_floats,
    replicas=st.none() | st.integers(-(10**9), 10**9),
)


@settings(max_examples=300, deadline=None)
@given(
    config=configs,
    steps=st.lists(
        st.tuples(arbitrary, st.floats(allow_nan=False, allow_infinity=False)), max_size=20
    ),
)
def test_arbitrary_decisions_and_clocks_never_raise(
    config: GuardConfig, steps: list[tuple[Decision, float]]
) -> None:
    pipeline, state = build_pipeline(config), GuardState()
    for decision, now in steps:  # times in any order, of any magnitude
        result, state = pipeline.run(decision, now, state)
        assert result == decision or (
            isinstance(result, Suppressed) and result.decision == decision and result.reason
        )
        assert build_pipeline().load_state(state.to_json()) == state
