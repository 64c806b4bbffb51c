from __future__ import annotations

import math

import pytest

from remediator.guard.min_age import MinAge, MinAgeConfig
from remediator.guard.state import GuardState

from .factory import T0, make


@pytest.mark.parametrize(
    ("age", "cold", "factor", "reason"),
    [
        (900, 300, 1.0, None),
        (300, 300, 1.0, None),  # exactly its cold start: old enough
        (
            299,
            300,
            1.0,
            "pod ml/vllm-0 is 299s old, younger than its expected cold start 300s x 1 = 300s",
        ),
        (
            90,
            300,
            1.0,
            "pod ml/vllm-0 is 90s old, younger than its expected cold start 300s x 1 = 300s",
        ),
        (
            400,
            300,
            1.5,
            "pod ml/vllm-0 is 400s old, younger than its expected cold start 300s x 1.5 = 450s",
        ),
        (450, 300, 1.5, None),
        (5, 300, 0.0, None),  # factor 0 switches the age check off (not the unknown-age one)
    ],
)
def test_age_against_expected_cold_start(
    age: float, cold: float, factor: float, reason: str | None
) -> None:
    stage = MinAge(MinAgeConfig(factor=factor))
    decision = make(pod_created_at=T0 - age, expected_cold_start_s=cold)
    assert stage.check(decision, T0, GuardState()).reason == reason


UNKNOWN_AGE = "pod ml/vllm-0 creation time unknown: never delete a pod of unknown age"
UNKNOWN_COLD = "pod ml/vllm-0 expected cold start unknown: cannot tell it from slow"


@pytest.mark.parametrize(
    ("created", "cold", "reason"),
    [
        (None, 300, UNKNOWN_AGE),
        (math.nan, 300, UNKNOWN_AGE),
        (math.inf, 300, UNKNOWN_AGE),
        (T0 - 900, None, UNKNOWN_COLD),
        (T0 - 900, math.nan, UNKNOWN_COLD),
        (T0 - 900, -1, UNKNOWN_COLD),
    ],
)
def test_never_guesses(created: float | None, cold: float | None, reason: str) -> None:
    decision = make(pod_created_at=created, expected_cold_start_s=cold)
    assert MinAge().check(decision, T0, GuardState()).reason == reason


@pytest.mark.parametrize("action", ["restart-warmup", "verify-gpu-memory", "cordon-node", "notify"])
def test_only_pod_deletions_are_checked(action: str) -> None:
    decision = make(action=action, pod_created_at=None, expected_cold_start_s=None)
    assert MinAge().check(decision, T0, GuardState()).passed


def test_record_changes_nothing() -> None:
    state = GuardState()
    assert MinAge().record(make(), T0, state) is state


STALLED = "before_first_step"  # progress-aware detection found it stalled in that stretch


@pytest.mark.parametrize(("stalled", "held"), [(False, False), (True, True)])
def test_a_pod_found_stalled_by_its_step_is_left_to_that_rule_unless_told(
    stalled: bool, held: bool
) -> None:
    """60 s old, expected cold start 600 s: its engine said nothing for 3x what its siblings
    took before their first step line (progress.factor, floor and checks: the step's own
    minimum age). `stalled: false` lets it through; `stalled: true` holds it to min_age."""
    stage = MinAge(MinAgeConfig(factor=1.0, stalled=stalled))
    decision = make(pod_created_at=T0 - 60, expected_cold_start_s=600, stalled=STALLED)
    verdict = stage.check(decision, T0, GuardState())
    assert (verdict.reason is not None) == held
    assert (stage.not_before(decision, T0) == T0 + 540) == held
    judged_by_age = make(pod_created_at=T0 - 60, expected_cold_start_s=600)
    assert stage.check(judged_by_age, T0, GuardState()).reason is not None


def test_a_stalled_pod_of_unknown_age_is_still_not_deleted() -> None:
    stage = MinAge(MinAgeConfig(factor=1.0, stalled=False))
    decision = make(pod_created_at=None, expected_cold_start_s=600, stalled=STALLED)
    assert stage.check(decision, T0, GuardState()).reason == UNKNOWN_AGE
