"""hedge_budget: hedges' GPU-minutes within a share of cold starts' GPU-minutes; and blast_radius
counting hedges beside deletions, each pod once."""

from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.blast_radius import BlastRadius, BlastRadiusConfig, BlastRadiusState
from remediator.guard.hedge_budget import HedgeBudget, HedgeBudgetConfig, HedgeBudgetState
from remediator.guard.pipeline import build_pipeline, parse_guardrails
from remediator.guard.state import GuardState

from .factory import T0, make

STAGE = HedgeBudget(HedgeBudgetConfig(max_percent=5))


def hedge(**changes: object) -> Decision:
    """A hedge of a 2-GPU pod whose model cold-starts in 300 s (charged 600 GPU-s), with the
    engine's clock-in: 20 cold starts' worth (12000 GPU-s, 5%: 600 GPU-s)."""
    base = {
        "action": "hedge-pod",
        "incident": "hedge-1",
        "gpus": 2,
        "expected_cold_start_s": 300.0,
        "cold_start_gpu_s": 12000.0,
        "clocked_since": T0 - 3600,
    }
    return make(**{**base, **changes})  # type: ignore[arg-type]


def test_a_hedge_within_the_share_of_cold_starts_goes_and_is_charged() -> None:
    state = GuardState()
    assert STAGE.check(hedge(), T0, state).passed
    after = STAGE.record(hedge(), T0, state)
    assert after.of("hedge_budget", HedgeBudgetState).spent == ((T0 - 3600, 600.0),)
    verdict = STAGE.check(hedge(target="vllm-1", uid="uid-1"), T0 + 1, after)
    assert verdict.reason == (
        "hedge budget: 10.0 GPU-min of hedges + 10.0 GPU-min for this one would exceed 5% of "
        "200.0 GPU-min of cold starts (10.0 GPU-min)"
    )
    assert verdict.retry_at is None  # no retry: the stall goes on to its own end


def test_more_cold_starts_pay_for_more_hedges() -> None:
    state = STAGE.record(hedge(), T0, GuardState())
    assert STAGE.check(hedge(uid="uid-1", cold_start_gpu_s=24000.0), T0 + 60, state).passed


def test_a_hedge_that_costs_more_than_the_share_never_goes() -> None:
    assert not STAGE.check(hedge(cold_start_gpu_s=11999.0), T0, GuardState()).passed
    assert STAGE.check(hedge(), T0, GuardState()).passed  # 600 of 600: it goes


def test_a_restarted_engine_counts_afresh() -> None:
    """A new count (clocked_since) is paid only by its own cold starts; the old charges
    belong to the old count."""
    state = STAGE.record(hedge(), T0, GuardState())
    fresh = hedge(uid="uid-2", clocked_since=T0, cold_start_gpu_s=0.0)
    assert not STAGE.check(fresh, T0 + 1, state).passed  # nothing clocked in yet
    paid = hedge(uid="uid-2", clocked_since=T0, cold_start_gpu_s=12000.0)
    assert STAGE.check(paid, T0 + 1, state).passed


@pytest.mark.parametrize(
    "changes",
    [
        {"gpus": None},
        {"gpus": 0},
        {"expected_cold_start_s": None},
        {"cold_start_gpu_s": None},
        {"clocked_since": None},
    ],  # fmt: skip
)
def test_a_hedge_of_unknown_cost_or_unknown_pay_is_held(changes: dict[str, object]) -> None:
    verdict = STAGE.check(hedge(**changes), T0, GuardState())
    assert verdict.reason is not None and "never guess" in verdict.reason


def test_other_actions_pass_and_are_not_charged() -> None:
    assert STAGE.check(make(), T0, GuardState()).passed
    assert STAGE.record(make(), T0, GuardState()) == GuardState()


def test_the_charge_is_a_knob() -> None:
    half = HedgeBudget(HedgeBudgetConfig(max_percent=5, charge_cold_starts=0.5))
    state = half.record(hedge(), T0, GuardState())
    assert state.of("hedge_budget", HedgeBudgetState).spent == ((T0 - 3600, 300.0),)
    assert half.check(hedge(uid="uid-1"), T0, state).passed


def test_the_state_round_trips_and_bad_state_is_refused() -> None:
    pipeline = build_pipeline(parse_guardrails({"hedge_budget": {"max_percent": 5}}))
    state = STAGE.record(hedge(), T0, GuardState())
    assert pipeline.load_state(state.to_json()) == state
    with pytest.raises(ValueError, match=r"hedge_budget\.spent\[0\]"):
        pipeline.load_state('{"version": 1, "hedge_budget": {"spent": [[1]]}}')


def test_the_pipeline_weighs_hedges_with_the_budget() -> None:
    pipeline = build_pipeline(parse_guardrails({"hedge_budget": {"max_percent": 1}}))
    held, _ = pipeline.run(hedge(), T0, GuardState())
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
