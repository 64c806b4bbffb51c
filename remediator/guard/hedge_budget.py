"""hedge_budget: hedges' GPU-minutes at most `max_percent` of cold starts' GPU-minutes.

A hedge runs a second pod of a replica for a while: GPUs that serve nobody unless it wins.
Its cost is charged when it is clocked in (let through): the GPUs of the hedge pod for one
expected cold start of its model, the most it runs before one of the two is Ready (or the
step gives up). What pays for it is what the fleet's cold starts took of their GPUs,
scheduled to Ready, as the deciding engine clocked them in (`Decision.cold_start_gpu_s`,
counted since `Decision.clocked_since`). A hedge is let through while the hedges charged
since then, this one included, stay within `max_percent` of that.

An engine that restarts counts from zero again, from a new `clocked_since`: the hedges
charged before it no longer count against it, and it hedges again only once its own cold
starts pay for it. A hedge that does not say its cost (its GPUs, its model's expected cold
start) or what pays for it is held: never guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, starts_pods, suppress
from remediator.guard.state import GuardState, StateError, read_number, read_object

_EPOCHS = 8  # engines' counts remembered (a restart is a new one; several run on Kafka)


@dataclass(frozen=True, slots=True)
class HedgeBudgetConfig:
    max_percent: float = field(default=5.0, metadata={"min": 0, "max": 100})
    # A hedge's charge, in expected cold starts of its pod's GPUs (1: the most it runs).
    charge_cold_starts: float = field(default=1.0, metadata={"min": 0})


@dataclass(frozen=True, slots=True)
class HedgeBudgetState:
    # (clocked_since, GPU-seconds charged to hedges since), newest count last
    spent: tuple[tuple[float, float], ...] = ()

    def to_doc(self) -> Any:
        return {"spent": [list(s) for s in self.spent]}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> HedgeBudgetState:
        raw = read_object(value, path, {"spent"}).get("spent", [])
        if not isinstance(raw, list):
            raise StateError(f"{path}.spent", "expected a list")
        out: list[tuple[float, float]] = []
        for i, item in enumerate(raw):
            where = f"{path}.spent[{i}]"
            if not isinstance(item, list) or len(item) != 2:
                raise StateError(where, "expected [clocked_since, gpu_seconds]")
            out.append((read_number(item[0], where), read_number(item[1], where)))
        return cls(tuple(out))


def charge_gpu_s(decision: Decision, cold_starts: float) -> float | None:
    """What the hedge may cost: its pod's GPUs for `cold_starts` expected cold starts."""
    gpus, cold = decision.gpus, decision.expected_cold_start_s
    if gpus is None or gpus <= 0 or cold is None or cold < 0:
        return None
    return gpus * cold * cold_starts


def _minutes(gpu_s: float) -> str:
    return f"{gpu_s / 60:.1f} GPU-min"


@dataclass(frozen=True, slots=True)
class HedgeBudget:
    name: ClassVar[str] = "hedge_budget"
    Config: ClassVar[type[Any]] = HedgeBudgetConfig
    State: ClassVar[type[Any] | None] = HedgeBudgetState
    simulates: ClassVar[bool] = False
    config: HedgeBudgetConfig = HedgeBudgetConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not starts_pods(decision):
            return PASS
        charge = charge_gpu_s(decision, self.config.charge_cold_starts)
        paid, since = decision.cold_start_gpu_s, decision.clocked_since
        if charge is None or paid is None or since is None:
            return suppress(
                f"hedge budget: {decision.where}'s GPUs, expected cold start or the fleet's "
                "cold-start GPU-minutes unknown: never guess what a hedge costs"
            )
        spent = dict(state.of(self.name, HedgeBudgetState).spent).get(since, 0.0)
        allowed = paid * self.config.max_percent / 100
        if spent + charge > allowed:
            return suppress(
                f"hedge budget: {_minutes(spent)} of hedges + {_minutes(charge)} for this one "
                f"would exceed {self.config.max_percent:g}% of {_minutes(paid)} of cold starts "
                f"({_minutes(allowed)})"
            )  # no retry: the pod's stall goes on to its own end (hung: deleted)
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        charge = charge_gpu_s(decision, self.config.charge_cold_starts)
        since = decision.clocked_since
        if not starts_pods(decision) or charge is None or since is None:
            return state
        spent = dict(state.of(self.name, HedgeBudgetState).spent)
        spent[since] = spent.pop(since, 0.0) + charge  # newest count last
        kept = tuple(spent.items())[-_EPOCHS:]
        return state.put(self.name, HedgeBudgetState(kept))
