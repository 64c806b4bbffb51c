"""kill_switch: an SRE stops every action at once, without a redeploy.

The flag lives in this stage's state, which the runtime flips when the kill-switch
ConfigMap file changes (`engage`); `engaged: true` in the policy pins it on. Slack
notes still go out: on-call must hear what would have been done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, acts, describe, suppress
from remediator.guard.state import GuardState, StateError, read_object, read_str


@dataclass(frozen=True, slots=True)
class KillSwitchConfig:
    engaged: bool = False  # pins the switch on from the policy file; the runtime flips state


@dataclass(frozen=True, slots=True)
class KillSwitchState:
    engaged: bool = False
    note: str = ""  # who flipped it and why, shown in every suppression

    def to_doc(self) -> Any:
        return {"engaged": self.engaged, "note": self.note}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> KillSwitchState:
        obj = read_object(value, path, {"engaged", "note"})
        engaged = obj.get("engaged", False)
        if not isinstance(engaged, bool):
            raise StateError(f"{path}.engaged", f"expected a bool, got {type(engaged).__name__}")
        return cls(engaged=engaged, note=read_str(obj.get("note", ""), f"{path}.note"))


@dataclass(frozen=True, slots=True)
class KillSwitch:
    name: ClassVar[str] = "kill_switch"
    Config: ClassVar[type[Any]] = KillSwitchConfig
    State: ClassVar[type[Any] | None] = KillSwitchState
    simulates: ClassVar[bool] = False
    config: KillSwitchConfig = KillSwitchConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        switch = state.of(self.name, KillSwitchState)
        if not acts(decision) or not (self.config.engaged or switch.engaged):
            return PASS
        source = "by the policy file" if self.config.engaged else "by the kill-switch ConfigMap"
        note = f" ({switch.note})" if switch.engaged and switch.note else ""
        # It may be turned off at any time: ask again at the next look.
        return suppress(f"kill switch engaged {source}{note}: {describe(decision)} not run", now)

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state


def engage(state: GuardState, engaged: bool, note: str = "") -> GuardState:
    """What the runtime calls when the kill-switch ConfigMap file changes."""
    return state.put(KillSwitch.name, KillSwitchState(engaged=engaged, note=note))
