"""One process's core: tracker, metrics, policy and guardrails over a clock it is given.

The session does no I/O: it is fed inputs and times, and tells an `Output` what
happened (transitions, decisions, suppressions). Replay drives it from files; the
embedded runtime drives it from watches and webhooks and hands decisions to executors.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry

from remediator.inputs.records import Input
from remediator.metrics.export import TimelineMetrics
from remediator.timeline.tracker import StateChange, Tracker


class Sink(Protocol):
    def transition(self, change: StateChange) -> None: ...


class Session:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.tracker = Tracker()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = TimelineMetrics(self.registry)
        self.now = 0.0

    @classmethod
    def from_policy_file(cls, path: str | None) -> Session:
        return cls()

    def feed(self, item: Input, out: Sink) -> None:
        """Apply one input at its own time (or the current time when it has none)."""
        if item.at is not None and item.at > self.now:
            self.advance(item.at, out)
        change = self.tracker.apply(item, self.now)
        if change is not None:
            self.metrics.observe(change)
            out.transition(change)

    def advance(self, now: float, out: Sink) -> None:
        """Move the clock forward (never back)."""
        if now > self.now:
            self.now = now
