"""dedup: the same action on the same target once per window.

Alertmanager repeats a firing alert every `repeat_interval`, and a watch event
and an alert can both report one stuck pod under different incident ids; the
key is therefore (action, namespace, target), not the incident. Notify decisions
go through here too, so on-call is not paged twice for one thing. A note told in the
thread of another incident (`Decision.told_under`: a node found settled again, under the
message that said it was not) pages no one and repeats nothing: neither held nor counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import PASS, Verdict, describe, fmt_s, suppress
from remediator.guard.state import GuardState, Stamps, prune, read_stamps


@dataclass(frozen=True, slots=True)
class DedupConfig:
    window_s: float = field(default=300.0, metadata=NON_NEGATIVE)


@dataclass(frozen=True, slots=True)
class DedupState:
    seen: Stamps = field(default_factory=dict)  # "action ns/target" -> let through at

    def to_doc(self) -> Any:
        return {"seen": dict(self.seen)}

    @classmethod
    def from_doc(cls, value: Any, path: str) -> DedupState:
        return cls(read_stamps(value, path, "seen"))


def dedup_key(decision: Decision) -> str:
    return describe(decision)


def _a_reply(decision: Decision) -> bool:
    """A note in another incident's thread (a deletion told there is still deduplicated)."""
    return decision.told_under is not None and not action(decision.action).acts


@dataclass(frozen=True, slots=True)
class Dedup:
    name: ClassVar[str] = "dedup"
    Config: ClassVar[type[Any]] = DedupConfig
    State: ClassVar[type[Any] | None] = DedupState
    simulates: ClassVar[bool] = False
    config: DedupConfig = DedupConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if _a_reply(decision):
            return PASS
        key = dedup_key(decision)
        at = state.of(self.name, DedupState).seen.get(key)
        if at is None or now - at >= self.config.window_s:
            return PASS
        # A superseding action (a warmup for a newer image) is asked again when the
        # window ends; a plain repeat is no for good.
        retry_at = at + self.config.window_s if action(decision.action).supersedes else None
        return suppress(
            f"duplicate: {key} was let through {fmt_s(now - at)} ago "
            f"(window {fmt_s(self.config.window_s)})",
            retry_at,
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if _a_reply(decision):
            return state
        seen = prune(state.of(self.name, DedupState).seen, now, self.config.window_s)
        seen[dedup_key(decision)] = now
        return state.put(self.name, DedupState(seen))
