"""cooldown: after an action on a target, leave it alone for a while.

A deleted pod's replacement gets a new name (Deployment) or the same one
(StatefulSet); either way it needs time to cold-start before anyone judges it.
So a pod deletion cools down both the pod's name and its owning workload, and a
replacement stuck early is not killed in a loop.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from remediator.guard.config import CooldownConfig
from remediator.guard.stage import PASS, Verdict, acts, fmt_s, suppress
from remediator.guard.state import CooldownState, GuardState, prune
from remediator.policy.decision import Decision


def cooldown_keys(decision: Decision) -> tuple[str, ...]:
    target = f"{decision.namespace}/{decision.target}"
    if decision.action == "delete-pod" and decision.workload:
        return (target, f"workload {decision.workload}")
    return (target,)


@dataclass(frozen=True, slots=True)
class Cooldown:
    name: ClassVar[str] = "cooldown"
    config: CooldownConfig = CooldownConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        for key in cooldown_keys(decision):
            at = state.cooldown.last.get(key)
            if at is not None and now - at < self.config.seconds:
                left = self.config.seconds - (now - at)
                return suppress(
                    f"cooldown: {key} was acted on {fmt_s(now - at)} ago; "
                    f"next action allowed in {fmt_s(left)}"
                )
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        last = prune(state.cooldown.last, now, self.config.seconds)
        for key in cooldown_keys(decision):
            last[key] = now
        return replace(state, cooldown=CooldownState(last))
