"""cooldown: after an action on a target, leave it alone for a while.

A deleted pod's replacement gets a new name (Deployment) or the same one
(StatefulSet); either way it needs time to cold-start before anyone judges it.
So a pod deletion cools down both the pod's name and its owning workload, and a
replacement stuck early is not killed in a loop.

A hedge (`hedge-pod`) changes neither the pod nor the replica it serves (a second pod
starts beside it): it neither cools anything down nor waits for a cooldown, so the pod's
own deletion, should it go on to hang, is not held by its hedge. The blast radius and the
hedge budget weigh hedges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import PASS, Verdict, acts, deletes_pods, fmt_s, starts_pods, suppress
from remediator.guard.state import GuardState, Stamps, prune, read_stamps


@dataclass(frozen=True, slots=True)
class CooldownConfig:
    # 0 s by simulation (docs/simulation-defaults.md): a replacement slow the same way is
    # the policy engine's kill-loop hold, and any cooldown serialises a workload's hung pods
    # (30 s: the tenth of a scale-up wave waited five minutes).
    seconds: float = field(default=0.0, metadata=NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class CooldownState:
    last: Stamps = field(default_factory=dict)  # target or workload key -> last action at

    def to_doc(self) -> Any:
        return {"last": dict(self.last)}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> CooldownState:
        return cls(read_stamps(value, path, "last"))


def cooldown_keys(decision: Decision) -> tuple[str, ...]:
    if starts_pods(decision):
        return ()
    target = f"{decision.namespace}/{decision.target}"
    if deletes_pods(decision) and decision.workload:
        return (target, f"workload {decision.workload}")
    return (target,)


@dataclass(frozen=True, slots=True)
class Cooldown:
    name: ClassVar[str] = "cooldown"
    Config: ClassVar[type[Any]] = CooldownConfig
    State: ClassVar[type[Any] | None] = CooldownState
    simulates: ClassVar[bool] = False
    config: CooldownConfig = CooldownConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not acts(decision):
            return PASS
        last = state.of(self.name, CooldownState).last
        for key in cooldown_keys(decision):
            at = last.get(key)
            if at is not None and now - at < self.config.seconds:
                left = self.config.seconds - (now - at)
                # Ask again at the next look: the pod may have moved on by then.
                return suppress(
                    f"cooldown: {key} was acted on {fmt_s(now - at)} ago; "
                    f"next action allowed in {fmt_s(left)}",
                    now,
                )
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not acts(decision):
            return state
        last = prune(state.of(self.name, CooldownState).last, now, self.config.seconds)
        for key in cooldown_keys(decision):
            last[key] = now
        return state.put(self.name, CooldownState(last))
