from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.cooldown import Cooldown, CooldownConfig, CooldownState
from remediator.guard.state import GuardState

from .factory import T0, make, notify

STAGE = Cooldown(CooldownConfig(seconds=600))
DELETED = STAGE.record(make(), T0, GuardState())


@pytest.mark.parametrize(
    ("decision", "now", "reason"),
    [
        (
            make(incident="inc-2"),
            T0 + 60,
            "cooldown: ml/vllm-0 was acted on 60s ago; next action allowed in 540s",
        ),
        # a Deployment's replacement pod has a new name but the same workload
        (
            make(target="vllm-0-x7k2p", incident="inc-3"),
            T0 + 120,
            "cooldown: workload ml/Deployment/vllm was acted on 120s ago; "
            "next action allowed in 480s",
        ),
        # a StatefulSet's replacement keeps the name
        (
            make(workload="ml/StatefulSet/vllm"),
            T0 + 1,
            "cooldown: ml/vllm-0 was acted on 1s ago; next action allowed in 599s",
        ),
        (make(target="vllm-9", workload="ml/Deployment/other"), T0 + 1, None),
        (make(target="vllm-9", workload=None), T0 + 1, None),
        (make(incident="inc-2"), T0 + 600, None),
        (notify(), T0 + 1, None),  # a note is not an action
        (make(action="restart-warmup", target="gpu-warmup", namespace="kube-system"), T0 + 1, None),
    ],
)
def test_check(decision: Decision, now: float, reason: str | None) -> None:
    assert STAGE.check(decision, now, DELETED).reason == reason


def test_workload_is_a_key_only_for_pod_deletions() -> None:
    state = STAGE.record(make(action="restart-warmup", target="gpu-warmup"), T0, GuardState())
    assert dict(state.of("cooldown", CooldownState).last) == {"ml/gpu-warmup": T0}


def test_record_keeps_keys_for_pod_and_workload_and_forgets_expired() -> None:
    state = GuardState({"cooldown": CooldownState({"ml/old": T0 - 600, "ml/young": T0 - 1})})
    after = STAGE.record(make(), T0, state)
    assert dict(after.of("cooldown", CooldownState).last) == {
        "ml/young": T0 - 1,
        "ml/vllm-0": T0,
        "workload ml/Deployment/vllm": T0,
    }


def test_record_ignores_notify() -> None:
    assert STAGE.record(notify(), T0, GuardState()) == GuardState()


def test_a_hedge_neither_cools_down_nor_waits() -> None:
    """A hedge starts a second pod beside the first: the first's deletion, should it hang,
    is not held by its hedge, and a recent deletion in the workload does not hold a hedge."""
    hedge = make(action="hedge-pod", incident="hedge-1")
    assert STAGE.record(hedge, T0, GuardState()) == GuardState()
    assert STAGE.check(make(), T0 + 1, STAGE.record(hedge, T0, GuardState())).passed
    assert STAGE.check(hedge, T0 + 1, DELETED).passed
