"""hedge_budget: no hedge while a workload is short of GPUs, hedges' GPU-minutes within a share of
cold starts' GPU-minutes; and blast_radius counting hedges beside deletions, each pod once."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision
from remediator.contract.records import GpuNews
from remediator.guard.blast_radius import BlastRadius, BlastRadiusConfig, BlastRadiusState
from remediator.guard.hedge_budget import (
    RACED_SLACK_S,
    SETTLE_SLACK_S,
    HedgeBudget,
    HedgeBudgetConfig,
    HedgeBudgetState,
    hear,
)
from remediator.guard.pipeline import build_pipeline, parse_guardrails
from remediator.guard.state import GuardState

from .factory import T0, make

STAGE = HedgeBudget(HedgeBudgetConfig(max_percent=5))
SHORT = "ml/Deployment/vllm"  # the workload of `hedge()`'s pod (tests/guard/factory)


def hedge(**changes: object) -> Decision:
    """A hedge of a 2-GPU pod whose model cold-starts in 300 s (charged 600 GPU-s)."""
    base = {"action": "hedge-pod", "incident": "hedge-1", "gpus": 2, "expected_cold_start_s": 300.0}
    return make(**{**base, **changes})  # type: ignore[arg-type]


def paid(gpu_s: float = 12000.0, state: GuardState | None = None) -> GuardState:
    """The fleet's healthy cold starts heard of: 20 cold starts' worth by default (12000
    GPU-s, 5%: 600 GPU-s)."""
    return hear(state or GuardState(), GpuNews(gpu_s=gpu_s), T0 - 3600)


def test_a_hedge_within_the_share_of_cold_starts_goes_and_is_charged() -> None:
    state = paid()
    assert STAGE.check(hedge(), T0, state).passed
    after = STAGE.record(hedge(), T0, state)
    budget = after.of("hedge_budget", HedgeBudgetState)
    assert (budget.paid, budget.spent) == (12000.0, 600.0)
    verdict = STAGE.check(hedge(target="vllm-1", uid="uid-1"), T0 + 1, after)
    assert verdict.reason == (
        "hedge budget: 10.0 GPU-min of hedges + 10.0 GPU-min for this one would exceed 5% of "
        "200.0 GPU-min of cold starts (10.0 GPU-min) in the last 24h"
    )
    assert verdict.retry_at is None  # no retry: the stall goes on to its own end


def test_more_cold_starts_pay_for_more_hedges() -> None:
    state = STAGE.record(hedge(), T0, paid())
    assert not STAGE.check(hedge(uid="uid-1"), T0 + 60, state).passed
    assert STAGE.check(hedge(uid="uid-1"), T0 + 60, paid(12000.0, state)).passed


def test_a_hedge_that_costs_more_than_the_share_never_goes() -> None:
    assert not STAGE.check(hedge(), T0, paid(11999.0)).passed
    assert STAGE.check(hedge(), T0, paid()).passed  # 600 of 600: it goes


def test_only_the_last_day_counts() -> None:
    """A quiet month banks nothing: cold starts paid, and hedges spent, by the hour, over the
    last day (and the hour going)."""
    hour = (T0 - 3600) - (T0 - 3600) % 3600  # the hour `paid()` hears in
    gone = hour + 3600 + 86400  # the first instant that hour is out of the window
    assert STAGE.check(hedge(), gone - 1, paid()).passed
    verdict = STAGE.check(hedge(), gone, paid())
    assert verdict.reason is not None and "of 0.0 GPU-min of cold starts" in verdict.reason
    spent = STAGE.record(hedge(), T0, paid())  # charged in the next hour: out an hour later
    again = hear(spent, GpuNews(gpu_s=12000.0), gone)
    assert not STAGE.check(hedge(uid="uid-1"), gone, again).passed  # 600 + 600 > 5% of 12000
    later = hear(spent, GpuNews(gpu_s=12000.0), gone + 3600)
    assert later.of("hedge_budget", HedgeBudgetState).hours == ((gone + 3600, 12000.0, 0.0),)
    assert STAGE.check(hedge(uid="uid-1"), gone + 3600, later).passed


EVENTS = st.lists(
    st.tuples(
        st.floats(0, 20_000, allow_nan=False),  # seconds since the last event
        st.one_of(st.floats(0, 50_000, allow_nan=False), st.none()),  # GPU-s paid; None: hedge
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(events=EVENTS)
def test_hedges_let_through_stay_within_the_share_of_any_window(
    events: list[tuple[float, float | None]],
) -> None:
    """Whatever the fleet pays and whenever hedges come, those let through spend at most 5%
    of what the hours of the window paid, and the state keeps no more than the window."""
    state, now, heard, charged = GuardState(), T0, [], []
    for i, (gap, gpu_s) in enumerate(events):
        now += gap
        if gpu_s is not None:
            state = hear(state, GpuNews(gpu_s=gpu_s), now)
            heard.append((now, gpu_s))
            continue
        decision = hedge(uid=f"uid-{i}", target=f"vllm-{i}")
        if STAGE.check(decision, now, state).passed:
            state = STAGE.record(decision, now, state)
            charged.append((now, 600.0))

            def window(seen: list[tuple[float, float]], end: float = now) -> float:
                return sum(v for at, v in seen if at - at % 3600 + 3600 > end - 86400)

            assert window(charged) <= window(heard) * 0.05 + 1e-6
        assert len(state.of("hedge_budget", HedgeBudgetState).hours) <= 26


def ended(uid: str, at: float, state: GuardState, replaced: bool = False) -> GuardState:
    """The deciders saw the hedged pod `uid`'s stall end at `at` (`replaced`: deleted)."""
    return hear(state, GpuNews(ended=((uid, at),), replaced=(uid,) if replaced else ()), at)


def test_a_settled_hedge_is_charged_what_it_can_have_held() -> None:
    """The stalled pod Ready 60 s after its hedge went (the hedge pod then deleted): the hedge
    held its 2 GPUs for at most those 60 s and the slack (the hedge pod's termination); the
    rest of its 600 GPU-s goes back, and pays for the next hedge, which the full charge held
    back (5% of 20000 GPU-s: 1000)."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0))
    assert not STAGE.check(hedge(uid="uid-1"), T0 + 60, state).passed
    settled = ended("uid-0", T0 + 60, state)
    budget = settled.of("hedge_budget", HedgeBudgetState)
    assert budget.spent == 2 * (60 + SETTLE_SLACK_S)
    assert budget.open == ()
    assert STAGE.check(hedge(uid="uid-1"), T0 + 60, settled).passed


def test_a_hedge_is_charged_from_when_its_racer_was_seen() -> None:
    """Its new pod seen racing 20 s after the hedge went (the workflow's start, the pod's
    scheduling: no GPUs held): charged from then, less the step's poll."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0))
    news = GpuNews(ended=(("uid-0", T0 + 60),), replaced=("uid-0",), raced=(("uid-0", T0 + 20),))
    settled = hear(state, news, T0 + 60)
    assert settled.of("hedge_budget", HedgeBudgetState).spent == 2 * (40 + RACED_SLACK_S)
    # never from before it was let through:
    early = msgspec.structs.replace(news, raced=(("uid-0", T0 + 1),))
    assert hear(state, early, T0 + 60).of("hedge_budget", HedgeBudgetState).spent == 2 * 60


def test_a_hedge_is_charged_from_its_racer_s_scheduling_where_that_is_known() -> None:
    """Its racer tracked by the decider that saw the end: charged from the racer's
    scheduling as the API server stamped it, with no slack; never from after it was seen
    racing (a control plane's clock ahead of ours), nor from before it was let through."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0))
    news = GpuNews(ended=(("uid-0", T0 + 60),), replaced=("uid-0",), raced=(("uid-0", T0 + 20),),
                   racer_scheduled=(("uid-0", T0 + 18),))  # fmt: skip

    def spent(news: GpuNews) -> float:
        return hear(state, news, T0 + 60).of("hedge_budget", HedgeBudgetState).spent

    assert spent(news) == 2 * 42
    assert spent(msgspec.structs.replace(news, racer_scheduled=(("uid-0", T0 + 25),))) == 2 * 40
    assert spent(msgspec.structs.replace(news, racer_scheduled=(("uid-0", T0 - 5),))) == 2 * 60
    assert spent(msgspec.structs.replace(news, raced=())) == 2 * 42


def test_a_won_hedge_is_charged_to_its_racer_s_end_where_that_is_sooner() -> None:
    """The stalled pod Ready first: its racer, deleted, holds its GPUs until it is gone,
    which its own decider tells (perhaps another partition's, later): charged to then, where
    that is within the slack; heard past the slack, or twice, it changes nothing."""
    state = ended("uid-0", T0 + 60, STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0)))
    gone = hear(state, GpuNews(racer_gone=(("uid-0", T0 + 70),)), T0 + 72)
    budget = gone.of("hedge_budget", HedgeBudgetState)
    assert (budget.spent, budget.won) == (2 * 70, ())
    again = hear(gone, GpuNews(racer_gone=(("uid-0", T0 + 71),)), T0 + 73)
    assert again.of("hedge_budget", HedgeBudgetState).spent == 2 * 70
    late = hear(state, GpuNews(racer_gone=(("uid-0", T0 + 200),)), T0 + 200)
    budget = late.of("hedge_budget", HedgeBudgetState)
    assert (budget.spent, budget.won) == (2 * (60 + SETTLE_SLACK_S), ())
    replaced = ended("uid-1", T0 + 60, STAGE.record(hedge(uid="uid-1"), T0, paid(20000.0)), True)
    assert replaced.of("hedge_budget", HedgeBudgetState).won == ()  # no racer left to end


def test_a_hedge_whose_stalled_pod_was_deleted_is_charged_to_that_end_alone() -> None:
    """Deleted (as hung, or beaten by the hedge pod): the hedge pod is its replacement from
    then on, nothing of the hedge is left to delete, so no slack; the same end heard again
    without `replaced` (another decider) changes nothing, the charge settled once."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0))
    settled = ended("uid-0", T0 + 60, state, replaced=True)
    assert settled.of("hedge_budget", HedgeBudgetState).spent == 2 * 60
    again = ended("uid-0", T0 + 61, settled)
    assert again.of("hedge_budget", HedgeBudgetState).spent == 2 * 60
    assert ended("uid-9", T0 + 60, state, replaced=True) == hear(state, GpuNews(), T0 + 60)


def test_a_hedge_that_held_more_than_it_was_charged_is_charged_what_it_held() -> None:
    """The charge is a reservation: a stall that outlasted a whole cold start (its deletion
    held, say) kept the hedge pod beside it all along, and the budget counts that, so the
    next hedge waits for the pay it took (5% of 20000 GPU-s: 1000, all spent)."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid(20000.0))
    long = ended("uid-0", T0 + 3600, state, replaced=True)
    assert long.of("hedge_budget", HedgeBudgetState).spent == 2 * 3600
    assert not STAGE.check(hedge(uid="uid-1"), T0 + 3600, long).passed


def test_an_end_never_heard_keeps_the_whole_charge_and_a_stranger_s_end_gives_nothing() -> None:
    """A decider restarted (its hedges' ends unknown) or an end heard for a pod whose hedge
    was never let through (held, or charged elsewhere): nothing is given back."""
    state = STAGE.record(hedge(uid="uid-0"), T0, paid())
    other = ended("uid-9", T0 + 60, state)
    budget = other.of("hedge_budget", HedgeBudgetState)
    assert (budget.spent, budget.open) == (600.0, ((("uid-0", T0, 2.0, 600.0)),))
    again = ended("uid-0", T0 + 61, ended("uid-0", T0 + 60, state))  # heard twice: once
    assert again.of("hedge_budget", HedgeBudgetState).spent == 2 * (60 + SETTLE_SLACK_S)


def test_an_open_hedge_is_forgotten_with_the_hour_it_was_charged_in() -> None:
    state = STAGE.record(hedge(uid="uid-0"), T0, paid())
    hour = T0 - T0 % 3600
    later = hear(state, GpuNews(gpu_s=1.0), hour + 3600 + 86400)
    budget = later.of("hedge_budget", HedgeBudgetState)
    assert budget.open == () and budget.spent == 0.0


HEDGED = st.lists(
    st.tuples(
        st.floats(0, 5_000, allow_nan=False),  # seconds since the last event
        st.sampled_from(["paid", "hedge", "end", "gone"]),
        st.floats(0, 50_000, allow_nan=False),  # GPU-s paid / which hedge ends (by index)
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(events=HEDGED)
def test_settled_hedges_are_charged_at_least_what_they_held_and_stay_within_the_share(
    events: list[tuple[float, str, float]],
) -> None:
    """Whatever comes in whatever order: the budget spends exactly each hedge's full charge
    until its end is heard, then its GPUs from its racer's scheduling to its end and the
    slack, more or less than the charge, or to its racer's end where that is heard first and
    sooner; and
    each hedge is let through only while what hedges spent, its charge included, stays
    within 5% of the window's pay."""
    state, now = GuardState(), T0
    heard: list[tuple[float, float]] = []
    hedges: list[list[float | None]] = []  # [charged at, end, racer gone, held from]

    def window(seen: list[tuple[float, float]]) -> float:
        return sum(v for at, v in seen if at - at % 3600 + 3600 > now - 86400)

    def cost(at: float, end: float | None, gone: float | None, start: float | None) -> float:
        if end is None or start is None:
            return 600.0
        held_to = end + SETTLE_SLACK_S if gone is None else min(end + SETTLE_SLACK_S, gone)
        return 2 * max(0.0, held_to - start)

    def costs() -> list[tuple[float, float]]:
        return [(h[0], cost(*h)) for h in hedges]  # type: ignore[arg-type]

    for i, (gap, what, value) in enumerate(events):
        now += gap
        if what == "paid":
            state = hear(state, GpuNews(gpu_s=value), now)
            heard.append((now, value))
        elif what == "end" and hedges:
            j = int(value) % len(hedges)
            # its racer scheduled a moment after it was let through, as its decider tells
            scheduled = hedges[j][0] + value % 7  # type: ignore[operator]
            if hedges[j][1] is None and hedges[j][0] + 86400 > now - 3600:  # type: ignore[operator]
                hedges[j][1], hedges[j][3] = now, scheduled
            news = GpuNews(ended=((f"uid-{j}", now),), racer_scheduled=((f"uid-{j}", scheduled),))
            state = hear(state, news, now)
        elif what == "gone" and hedges:  # its racer's decider saw it gone (heard once)
            j = int(value) % len(hedges)
            end, gone = hedges[j][1], hedges[j][2]
            if end is not None and gone is None and now < end + SETTLE_SLACK_S:
                hedges[j][2] = now
            state = hear(state, GpuNews(racer_gone=((f"uid-{j}", now),)), now)
        elif what == "hedge":
            decision = hedge(uid=f"uid-{len(hedges)}", target=f"vllm-{i}")
            if STAGE.check(decision, now, state).passed:
                state = STAGE.record(decision, now, state)
                hedges.append([now, None, None, None])
                assert window(costs()) <= window(heard) * 0.05 + 1e-6
        spent = state.of("hedge_budget", HedgeBudgetState).within(now, 86400)[1]
        assert spent == pytest.approx(window(costs()), abs=1e-6)


def test_the_window_is_a_knob() -> None:
    week = HedgeBudget(HedgeBudgetConfig(max_percent=5, window_s=7 * 86400))
    state = hear(GuardState(), GpuNews(gpu_s=12000.0), T0, window_s=7 * 86400)
    assert week.check(hedge(), T0 + 3 * 86400, state).passed
    assert not STAGE.check(hedge(), T0 + 3 * 86400, state).passed


def test_nothing_heard_pays_for_nothing() -> None:
    """A guard that has heard of no cold start (a first start with no stored state) lets
    no hedge through until the fleet's cold starts pay for one."""
    verdict = STAGE.check(hedge(), T0, GuardState())
    assert verdict.reason is not None and "of 0.0 GPU-min of cold starts" in verdict.reason


@pytest.mark.parametrize("changes", [{"gpus": None}, {"gpus": 0}, {"expected_cold_start_s": None}])
def test_a_hedge_of_unknown_cost_is_held(changes: dict[str, object]) -> None:
    verdict = STAGE.check(hedge(**changes), T0, paid())
    assert verdict.reason is not None and "never guess" in verdict.reason


def test_no_hedge_while_a_workload_is_short_of_gpus_until_the_window_ends() -> None:
    """Its own workload's shortage said first; another's holds it too (the hedge pod would
    take GPUs that workload's pods wait for)."""
    other = "ml/Deployment/other"
    state = hear(paid(), GpuNews(short=((other, T0 - 90, T0 + 510),)), T0 - 90)
    state = hear(state, GpuNews(short=((SHORT, T0 - 60, T0 + 540),)), T0 - 60)
    verdict = STAGE.check(hedge(), T0, state)
    assert verdict.reason == (
        f"no hedge: {SHORT} is short of GPUs (a pod of it was unschedulable for nvidia.com/gpu "
        "60s ago, within 600s); a hedge would queue behind real demand"
    )
    assert verdict.retry_at is None
    theirs = STAGE.check(hedge(workload="ml/Deployment/third"), T0, state)
    assert theirs.reason is not None and theirs.reason.startswith(f"no hedge: {other} is short")
    assert theirs.reason.endswith("a hedge would take GPUs its pods wait for")
    assert not STAGE.check(hedge(), T0 + 520, state).passed  # its own window goes on
    assert STAGE.check(hedge(workload=other), T0 + 540, state).passed  # both windows over


def test_the_latest_sighting_of_a_workload_counts_and_old_ones_are_forgotten() -> None:
    state = hear(GuardState(), GpuNews(short=((SHORT, T0, T0 + 600),)), T0)
    older = hear(state, GpuNews(short=((SHORT, T0 - 100, T0 + 500),)), T0)
    assert older.of("hedge_budget", HedgeBudgetState).short == ((SHORT, T0, T0 + 600),)
    later = hear(state, GpuNews(gpu_s=1.0), T0 + 600)  # heard past its end: forgotten
    assert later.of("hedge_budget", HedgeBudgetState).short == ()


def test_other_actions_pass_and_are_not_charged() -> None:
    state = hear(paid(), GpuNews(short=((SHORT, T0, T0 + 600),)), T0)
    assert STAGE.check(make(), T0, state).passed  # a deletion is never held for GPUs short
    assert STAGE.record(make(), T0, state) == state


def test_the_charge_is_a_knob() -> None:
    half = HedgeBudget(HedgeBudgetConfig(max_percent=5, charge_cold_starts=0.5))
    state = half.record(hedge(), T0, paid())
    assert state.of("hedge_budget", HedgeBudgetState).spent == 300.0
    assert half.check(hedge(uid="uid-1"), T0, state).passed


def test_the_state_round_trips_and_bad_state_is_refused() -> None:
    pipeline = build_pipeline(parse_guardrails({"hedge_budget": {"max_percent": 5}}))
    state = STAGE.record(hedge(), T0, hear(paid(), GpuNews(short=((SHORT, T0, T0 + 1),)), T0))
    assert state.of("hedge_budget", HedgeBudgetState).open  # an open hedge survives a restart
    assert pipeline.load_state(state.to_json()) == state
    # Settled and won, its racer's end awaited: that survives a restart too.
    settled = hear(state, GpuNews(ended=(("uid-0", T0 + 60),)), T0 + 60)
    assert set(settled.of("hedge_budget", HedgeBudgetState).to_doc()) == {"hours", "short", "won"}
    assert pipeline.load_state(settled.to_json()) == settled
    # With none open or won the record is as the release before settling wrote it (a
    # rollback reads it).
    past = hear(settled, GpuNews(gpu_s=1.0), T0 + 60 + SETTLE_SLACK_S)
    assert set(past.of("hedge_budget", HedgeBudgetState).to_doc()) == {"hours", "short"}
    assert pipeline.load_state(past.to_json()) == past
    with pytest.raises(ValueError, match=r"hedge_budget\.won\[0\].*negative"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"won": [["u", 0, 1, -2, 5]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.won\[0\]"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"won": [["u", 0, 1, 2]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.open\[0\].*negative"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"open": [["u", 1, 2, -5]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.open\[0\]"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"open": [[1, 1, 2, 5]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.short\[0\]"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"short": [["w", 1]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.hours\[0\]"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"hours": [[0, "lots", 0]]}}')
    with pytest.raises(ValueError, match=r"hedge_budget\.hours\[0\].*negative"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"hours": [[0, 1, -5]]}}')


@pytest.mark.parametrize(
    "old",
    [
        '{"spent": [[1740000000, 600.0]]}',  # per deciding engine ([since, GPU-s charged])
        '{"paid": 12000.0, "spent": 600.0, "short": []}',  # since the state began
    ],
)
def test_an_older_release_count_starts_from_nothing(old: str) -> None:
    """Earlier releases' counts say nothing of when they were paid: read as nothing paid,
    nothing spent (no hedge until a day's cold starts pay again)."""
    state = build_pipeline().load_state(f'{{"version": 1, "hedge_budget": {old}}}')
    assert state.of("hedge_budget", HedgeBudgetState) == HedgeBudgetState()


def test_the_pipeline_weighs_hedges_with_the_budget() -> None:
    pipeline = build_pipeline(parse_guardrails({"hedge_budget": {"max_percent": 1}}))
    held, _ = pipeline.run(hedge(), T0, paid())
    assert getattr(held, "guardrail", None) == "hedge_budget"


# ---- blast_radius counts hedges -----------------------------------------------------------
RADIUS = BlastRadius(BlastRadiusConfig(max_pods=1, max_percent=100, window_s=600))


def test_a_hedge_counts_in_the_blast_radius() -> None:
    state = RADIUS.record(hedge(), T0, GuardState())
    other = make(target="vllm-1", uid="uid-1", incident="inc-2")
    verdict = RADIUS.check(other, T0 + 1, state)
    assert verdict.reason is not None
    assert verdict.reason.startswith("blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment")
    assert not RADIUS.check(hedge(target="vllm-1", uid="uid-1"), T0 + 1, state).passed


def test_the_hedged_pod_deleted_later_is_counted_once() -> None:
    state = RADIUS.record(hedge(), T0, GuardState())
    delete = make()  # the same pod (uid-0), hung now
    assert RADIUS.check(delete, T0 + 20, state).passed
    after = RADIUS.record(delete, T0 + 20, state)
    assert after.of("blast_radius", BlastRadiusState).deletions == (("ml/Deployment/vllm", T0),)
    other = make(target="vllm-1", uid="uid-1", incident="inc-2")
    assert not RADIUS.check(other, T0 + 21, after).passed  # the one slot is still taken


def test_blast_radius_state_with_hedges_round_trips() -> None:
    pipeline = build_pipeline()
    state = RADIUS.record(hedge(), T0, GuardState())
    assert pipeline.load_state(state.to_json()) == state
    assert '"hedged"' in state.to_json()
    assert '"hedged"' not in RADIUS.record(make(), T0, GuardState()).to_json()


def _added(
    rows: list[tuple[float, float, float]], at: float, window: float, paid: float, spent: float
) -> tuple[tuple[float, float, float], ...]:
    """What `add` means: the hours overlapping the window ending at `at`, `at`'s hour with
    the amounts added, each hour once, none with nothing in it, oldest first."""
    hour = at - at % 3600.0
    sums: dict[float, list[float]] = {}
    for h, p, s in rows:
        if h + 3600.0 > at - window:
            sums[h] = [p, s]  # (a row read twice: the last one, as the reader keeps it)
    sums.setdefault(hour, [0.0, 0.0])
    sums[hour][0] += paid
    sums[hour][1] += spent
    return tuple((h, p, s) for h, (p, s) in sorted(sums.items()) if p or s)


_AMOUNT = st.sampled_from([0.0, 1.5, 600.0, 12000.0])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 30), _AMOUNT, _AMOUNT), max_size=8),
    at_s=st.integers(0, 31 * 3600),
    window_h=st.integers(1, 30),
    amounts=st.lists(st.tuples(_AMOUNT, _AMOUNT), min_size=1, max_size=4),
)
def test_adding_to_the_hours_is_the_plain_sum_from_any_stored_state(
    rows: list[tuple[int, float, float]],
    at_s: int,
    window_h: int,
    amounts: list[tuple[float, float]],
) -> None:
    """`add` takes a shortcut for a cold start heard in the hour going (most calls): from
    any stored state, unsorted, with an hour twice or one empty, the result is the same as
    the plain definition's, call after call."""
    stored = [(h * 3600.0, p, s) for h, p, s in rows]
    state = HedgeBudgetState.from_doc({"hours": [list(r) for r in stored], "short": []}, "s")
    expected = _added(stored, float(at_s), window_h * 3600.0, 0.0, 0.0)
    assert _added(list(state.hours), float(at_s), window_h * 3600.0, 0.0, 0.0) == expected
    for i, (paid_s, spent_s) in enumerate(amounts):
        at, window = float(at_s + 60 * i), window_h * 3600.0
        want = _added(list(state.hours), at, window, paid_s, spent_s)
        state = HedgeBudgetState(state.add(at, window, paid_s, spent_s))
        assert state.hours == want
