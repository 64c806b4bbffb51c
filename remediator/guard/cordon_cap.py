"""cordon_cap: cordon at most `max_nodes` GPU nodes per window.

A node whose GPU memory never settles takes down every pod scheduled there, and each
replacement lands there again (its GPUs are the freest). Cordoning it is the cure, and it
is on by default (`gpu_memory.cordon`, docs/simulation-defaults.md). A cordon removes a
whole node's GPUs from scheduling, though, and remediator leaves uncordoning to people. Many
nodes failing verification at once point at a common cause (a driver rollout, a broken
verification image, a DCGM misreport) rather than at the nodes, as many pods stuck at once
do for `blast_radius`: past the cap, a cordon is held and asked again when the oldest one
leaves the window, and on-call, told of each node as it is found, cordons by hand what
they judge right.

A cordon of a node already cordoned within the window is not counted again: a second
verification of the same node (an alert firing again) does not spend the cap twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import DAY, HOUR, PASS, Verdict, fmt_hours, fmt_time, suppress
from remediator.guard.state import GuardState, Stamps, prune, read_stamps

CORDON = "cordon-node"


@dataclass(frozen=True, slots=True)
class CordonCapConfig:
    # 8 a day: the fleets of docs/simulation-defaults.md have up to 4 such nodes each, and a
    # fleet with more than 8 in a day has a cause that a person should look at first.
    max_nodes: int = field(default=8, metadata=NON_NEGATIVE)
    window_s: float = field(default=DAY, metadata={"min": HOUR, "max": 7 * DAY})


@dataclass(frozen=True, slots=True)
class CordonCapState:
    cordoned: Stamps = field(default_factory=dict)  # node -> when remediator cordoned it

    def to_doc(self) -> Any:
        return {"cordoned": dict(self.cordoned)}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> CordonCapState:
        return cls(read_stamps(value, path, "cordoned"))


@dataclass(frozen=True, slots=True)
class CordonCap:
    name: ClassVar[str] = "cordon_cap"
    Config: ClassVar[type[Any]] = CordonCapConfig
    State: ClassVar[type[Any] | None] = CordonCapState
    simulates: ClassVar[bool] = False
    config: CordonCapConfig = CordonCapConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if decision.action != CORDON:
            return PASS
        recent = self._recent(state, now)
        if decision.target in recent or len(recent) < self.config.max_nodes:
            return PASS
        oldest = min(recent.values()) if recent else now
        free_at = oldest + self.config.window_s
        return suppress(
            f"cordon cap: {len(recent)} node(s) cordoned in the last "
            f"{fmt_hours(self.config.window_s)}, cap {self.config.max_nodes} (max_nodes); "
            f"cordon {decision.target} by hand if it should be (kubectl cordon "
            f"{decision.target}); asked again at {fmt_time(free_at)}",
            free_at,
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if decision.action != CORDON:
            return state
        recent = self._recent(state, now)
        recent.setdefault(decision.target, now)
        return state.put(self.name, CordonCapState(recent))

    def _recent(self, state: GuardState, now: float) -> dict[str, float]:
        return prune(state.of(self.name, CordonCapState).cordoned, now, self.config.window_s)
