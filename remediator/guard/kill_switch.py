"""kill_switch: an SRE stops every action at once, without a redeploy.

The flag lives in `GuardState.kill_switch`, which the runtime flips when the
kill-switch ConfigMap file changes; `engaged: true` in the policy pins it on.
Slack notes still go out: on-call must hear what would have been done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from remediator.guard.config import KillSwitchConfig
from remediator.guard.stage import PASS, Verdict, acts, describe, suppress
from remediator.guard.state import GuardState
from remediator.policy.decision import Decision


@dataclass(frozen=True, slots=True)
class KillSwitch:
    name: ClassVar[str] = "kill_switch"
    config: KillSwitchConfig = KillSwitchConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        switch = state.kill_switch
        if not acts(decision) or not (self.config.engaged or switch.engaged):
            return PASS
        source = "by the policy file" if self.config.engaged else "by the kill-switch ConfigMap"
        note = f" ({switch.note})" if switch.engaged and switch.note else ""
        return suppress(f"kill switch engaged {source}{note}: {describe(decision)} not run")

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state
