"""watch_current: no pod is deleted on a picture that may lag the cluster's.

A stuck-pod decision is made on what the watch brought. While the runtime knows that picture
may be behind (a Pod watch relisting after a reconnect, one that has not reached the API
server's current resourceVersion or has sent no BOOKMARK when one was due, serve just resumed
from a pause), a pod's Ready may still be on its way: a pod deletion decided then is held
(asked again at the next look), and the runtime has it looked at again the moment the watch
has caught up (on the fresh picture, where a pod that became Ready has no decision at all).

The runtime says when it is behind (`hold`), as it flips the kill switch: this stage reads no
clock and no watch; the caught-up test is the runtime's. Only pod deletions are held: a note
to on-call, a warmup or a cordon is not made wrong by a pod's late news.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.stage import PASS, Verdict, deletes_pods, describe, suppress
from remediator.guard.state import GuardState, read_object, read_str


@dataclass(frozen=True, slots=True)
class WatchCurrentConfig:
    """No keys: the hold is the runtime's to say; a runtime that never says holds nothing."""


@dataclass(frozen=True, slots=True)
class WatchCurrentState:
    behind: str = ""  # why the picture may lag the cluster's; "" when caught up

    def to_doc(self) -> Any:
        return {"behind": self.behind}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> WatchCurrentState:
        obj = read_object(value, path, {"behind"})
        return cls(behind=read_str(obj.get("behind", ""), f"{path}.behind"))


@dataclass(frozen=True, slots=True)
class WatchCurrent:
    name: ClassVar[str] = "watch_current"
    Config: ClassVar[type[Any]] = WatchCurrentConfig
    State: ClassVar[type[Any] | None] = WatchCurrentState
    simulates: ClassVar[bool] = False
    config: WatchCurrentConfig = WatchCurrentConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        behind = state.of(self.name, WatchCurrentState).behind
        if not behind or not deletes_pods(decision):
            return PASS
        # Held, not dropped: asked again at the next look, decided again once caught up.
        return suppress(
            f"behind ({behind}): {describe(decision)} held until the watch has caught up", now
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        return state


def hold(state: GuardState, behind: str) -> GuardState:
    """What the runtime calls when its picture falls behind (`behind`: why) or catches up
    (`""`)."""
    return state.put(WatchCurrent.name, WatchCurrentState(behind=behind))
