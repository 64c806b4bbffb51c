"""min_age: never delete a pod younger than its expected cold start.

KAI Scheduler's min-runtime idea: a 70B vLLM pod that is 90 s old and still in
engine init is not stuck, it is loading weights. Robusta once deleted a freshly
created healthy pod; this stage is why that cannot happen here. A pod whose
creation time or expected cold start is unknown is not deleted: never guess.
A "not yet" says when the pod will be old enough, so it is looked at again then.

A pod that progress-aware detection found stalled (`Decision.stalled`: its engine said
nothing for `progress.factor` times what its siblings took in the same stretch, at least
`progress.floor_s`, for `checks` checks in a row) is judged by its step, not its age, where
`stalled` is false: that rule is a minimum age per step (its age must still be known).
`stalled: true` holds it to min_age all the same.

The expected cold start is the P99 of the model's recent cold starts, so it moves. A pod
held by an estimate that a finished cold start then brings down is looked at again when
the new one lets it go (`core.guard.Guard.reweigh`, which asks `not_before` again), not
when the old one would have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import PASS, Verdict, deletes_pods, fmt_s, suppress
from remediator.guard.state import GuardState


@dataclass(frozen=True, slots=True)
class MinAgeConfig:
    factor: float = field(default=1.0, metadata=NON_NEGATIVE)
    # Hold pods found stalled by their step to min_age too (see the module's doc). Off, by
    # simulation (docs/simulation-defaults.md): it held hung pods on an untuned fleet until
    # they were as old as their model's expected cold start (~650 s), whatever their step.
    stalled: bool = False


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class MinAge:
    name: ClassVar[str] = "min_age"
    Config: ClassVar[type[Any]] = MinAgeConfig
    State: ClassVar[type[Any] | None] = None
    simulates: ClassVar[bool] = False
    config: MinAgeConfig = MinAgeConfig()

    def _by_step(self, decision: Decision) -> bool:
        """Found stalled by its step, and this stage leaves such pods to that rule."""
        return decision.stalled is not None and not self.config.stalled

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not deletes_pods(decision):
            return PASS
        pod = f"{decision.namespace}/{decision.target}"
        created, cold = decision.pod_created_at, decision.expected_cold_start_s
        if created is None or not _known(created):
            why = f"pod {pod} creation time unknown: never delete a pod of unknown age"
            return suppress(why, now)  # a later look may know it
        if self._by_step(decision):
            return PASS
        if cold is None or not _known(cold) or cold < 0:
            why = f"pod {pod} expected cold start unknown: cannot tell it from slow"
            return suppress(why, now)
        min_age = cold * self.config.factor
        if created + min_age > now:
            return suppress(
                f"pod {pod} is {fmt_s(now - created)} old, younger than its expected cold start "
                f"{fmt_s(cold)} x {self.config.factor:g} = {fmt_s(min_age)}",
                created + min_age,
            )
        return PASS

    def not_before(self, decision: Decision, now: float) -> float | None:
        """When this stage would let the decision through, if that is after `now`."""
        created, cold = decision.pod_created_at, decision.expected_cold_start_s
        if not deletes_pods(decision) or self._by_step(decision) or created is None or cold is None:
            return None
        at = created + cold * self.config.factor
        return at if at > now else None

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state
