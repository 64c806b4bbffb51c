"""The one interface every guardrail implements, and what it answers.

Like Alertmanager's notify `Stage`: one small job per stage, and "no" is not an
error but an empty result with a reason. Stages never read a clock: `now` is
passed in, so the same inputs always give the same verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from remediator.guard.state import GuardState
from remediator.policy.decision import Decision


@dataclass(frozen=True, slots=True)
class Verdict:
    """A stage's answer: `reason is None` lets the decision through."""

    reason: str | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None


PASS = Verdict()


def suppress(reason: str) -> Verdict:
    return Verdict(reason=reason)


class Stage(Protocol):
    """A guardrail. `check` must not change anything; `record` is called only for
    a decision every stage let through, and returns the stage's new state."""

    @property
    def name(self) -> str: ...

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict: ...

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState: ...


def acts(decision: Decision) -> bool:
    """Everything but a Slack note changes the cluster."""
    return decision.action != "notify"


def describe(decision: Decision) -> str:
    return f"{decision.action} {decision.namespace}/{decision.target}"


def fmt_time(t: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC, for reasons on-call reads."""
    try:
        return (
            datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        )
    except (OverflowError, OSError, ValueError):
        return f"t={t!r}"  # out of datetime's range: still say something exact


def fmt_s(seconds: float) -> str:
    """A duration, rounded for people: `42s`, `0.5s`."""
    return f"{seconds:.0f}s" if abs(seconds) >= 10 else f"{seconds:.3g}s"
