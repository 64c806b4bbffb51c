"""dedup: the same action on the same target once per window.

Alertmanager repeats a firing alert every `repeat_interval`, and a watch event
and an alert can both report one stuck pod under different incident ids; the
key is therefore (action, namespace, target), not the incident. Notify decisions
go through here too, so on-call is not paged twice for one thing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from remediator.guard.config import DedupConfig
from remediator.guard.stage import PASS, Verdict, describe, fmt_s, suppress
from remediator.guard.state import DedupState, GuardState, prune
from remediator.policy.decision import Decision


def dedup_key(decision: Decision) -> str:
    return describe(decision)


@dataclass(frozen=True, slots=True)
class Dedup:
    name: ClassVar[str] = "dedup"
    config: DedupConfig = DedupConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        key = dedup_key(decision)
        at = state.dedup.seen.get(key)
        if at is None or now - at >= self.config.window_s:
            return PASS
        return suppress(
            f"duplicate: {key} was let through {fmt_s(now - at)} ago "
            f"(window {fmt_s(self.config.window_s)})"
        )

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        seen = prune(state.dedup.seen, now, self.config.window_s)
        seen[dedup_key(decision)] = now
        return replace(state, dedup=DedupState(seen))
