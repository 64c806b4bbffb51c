"""min_age: never delete a pod younger than its expected cold start.

KAI Scheduler's min-runtime idea: a 70B vLLM pod that is 90 s old and still in
engine init is not stuck, it is loading weights. Robusta once deleted a freshly
created healthy pod; this stage is why that cannot happen here. A pod whose
creation time or expected cold start is unknown is not deleted: never guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from remediator.guard.config import MinAgeConfig
from remediator.guard.stage import PASS, Verdict, fmt_s, suppress
from remediator.guard.state import GuardState
from remediator.policy.decision import Decision


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class MinAge:
    name: ClassVar[str] = "min_age"
    config: MinAgeConfig = MinAgeConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if decision.action != "delete-pod":
            return PASS
        pod = f"{decision.namespace}/{decision.target}"
        created, cold = decision.pod_created_at, decision.expected_cold_start_s
        if created is None or not _known(created):
            return suppress(f"pod {pod} creation time unknown: never delete a pod of unknown age")
        if cold is None or not _known(cold) or cold < 0:
            return suppress(f"pod {pod} expected cold start unknown: cannot tell it from slow")
        min_age = cold * self.config.factor
        if created + min_age > now:
            return suppress(
                f"pod {pod} is {fmt_s(now - created)} old, younger than its expected cold start "
                f"{fmt_s(cold)} x {self.config.factor:g} = {fmt_s(min_age)}"
            )
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state
