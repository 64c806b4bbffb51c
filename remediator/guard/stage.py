"""The one interface every guardrail implements, and what it answers.

Like Alertmanager's notify `Stage`: one small job per stage, and "no" is not an
error but an empty result with a reason. Stages never read a clock: `now` is
passed in, so the same inputs always give the same verdict. A stage owns its
configuration (`Config`) and, when it remembers anything, its state record (`State`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from remediator.contract.actions import ACTING, DELETING_PODS, STARTING_PODS
from remediator.contract.decision import Decision
from remediator.guard.state import GuardState


@dataclass(frozen=True, slots=True)
class Verdict:
    """A stage's answer: `reason is None` lets the decision through. A "no" says when
    asking again may get another answer (`retry_at`), or None when it will not."""

    reason: str | None = None
    retry_at: float | None = None

    @property
    def passed(self) -> bool:
        return self.reason is None


PASS = Verdict()


def suppress(reason: str, retry_at: float | None = None) -> Verdict:
    return Verdict(reason=reason, retry_at=retry_at)


class Stage(Protocol):
    """A guardrail. `check` must not change anything; `record` is called only for a
    decision the pipeline let through (or one a simulating stage held), and returns the
    new state (and `Queues.queue` for one it held, where the stage keeps places).
    `simulates`: a "no" from this stage means "would have" (dry run), so the decision is
    recorded as if it had run."""

    @property
    def name(self) -> str: ...

    @property
    def simulates(self) -> bool: ...

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict: ...

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState: ...


@runtime_checkable
class HoldsUntil(Protocol):
    """A stage whose "not yet" names a time after `now` (min_age: when the pod is old
    enough). The pipeline asks it, cheaply and without a reason, when an earlier stage holds
    a decision, so the engine's next look waits for both."""

    def not_before(self, decision: Decision, now: float) -> float | None: ...


@runtime_checkable
class Queues(Protocol):
    """A stage whose "not yet" can keep the decision a place (the rate limit: its next free
    token). When it holds a decision the pipeline asks it to keep one, and gets the verdict
    to report (its turn as `retry_at`) and the state with the place kept: the one "no" that
    changes state, so the engine asks again exactly at the turn and the decision goes then
    (None: the stage keeps no place for this decision, and its own verdict stands)."""

    def queue(
        self, decision: Decision, now: float, state: GuardState
    ) -> tuple[Verdict, GuardState] | None: ...  # None: no place for this one


class StageClass(Protocol):
    """What the pipeline needs of a stage's class: its name, config type and state type."""

    name: str
    Config: type[Any]
    State: type[Any] | None

    def __call__(self, config: Any) -> Stage: ...


def acts(decision: Decision) -> bool:
    """The action changes the cluster (everything but a note to on-call)."""
    return decision.action in ACTING


def deletes_pods(decision: Decision) -> bool:
    return decision.action in DELETING_PODS


def starts_pods(decision: Decision) -> bool:
    """A hedge: a pod beyond the workload's replica count."""
    return decision.action in STARTING_PODS


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


HOUR = 3600.0
DAY = 86_400.0


def fmt_hours(seconds: float) -> str:
    """A window of whole hours or more, for people: `24h`, `1.5h`."""
    return f"{seconds / HOUR:g}h"


def fmt_s(seconds: float) -> str:
    """A duration, rounded for people: `42s`, `0.5s`."""
    return f"{seconds:.0f}s" if abs(seconds) >= 10 else f"{seconds:.3g}s"
