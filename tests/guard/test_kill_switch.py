from __future__ import annotations

import pytest

from remediator.contract.actions import ACTIONS as TABLE
from remediator.guard.kill_switch import KillSwitch, KillSwitchConfig, engage
from remediator.guard.state import GuardState

from .factory import T0, make

ACTIONS = sorted(TABLE)  # every row of the action table, hedge-pod included


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize(
    ("pinned", "flipped", "engaged"),
    [(False, False, False), (False, True, True), (True, False, True), (True, True, True)],
)
def test_suppresses_every_acting_decision_when_engaged(
    action: str, pinned: bool, flipped: bool, engaged: bool
) -> None:
    stage = KillSwitch(KillSwitchConfig(engaged=pinned))
    state = engage(GuardState(), flipped)
    verdict = stage.check(make(action=action), T0, state)
    assert verdict.passed is (not engaged or action == "notify")


@pytest.mark.parametrize(
    ("pinned", "note", "reason"),
    [
        (
            False,
            "alice: INC-42",
            "kill switch engaged by the kill-switch ConfigMap (alice: INC-42): "
            "delete-pod ml/vllm-0 not run",
        ),
        (
            False,
            "",
            "kill switch engaged by the kill-switch ConfigMap: delete-pod ml/vllm-0 not run",
        ),
        (True, "", "kill switch engaged by the policy file: delete-pod ml/vllm-0 not run"),
    ],
)
def test_reason_says_who_engaged_it(pinned: bool, note: str, reason: str) -> None:
    state = engage(GuardState(), not pinned, note)
    assert KillSwitch(KillSwitchConfig(engaged=pinned)).check(make(), T0, state).reason == reason


def test_flipping_back_lets_actions_through_again() -> None:
    state = engage(engage(GuardState(), True, "x"), False)
    assert KillSwitch().check(make(), T0, state).passed


def test_record_changes_nothing() -> None:
    state = engage(GuardState(), True)
    assert KillSwitch().record(make(), T0, state) is state
