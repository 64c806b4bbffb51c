"""One process's core: tracker, metrics, policy and guardrails over a clock it is given.

The session does no I/O: it is fed inputs and times, and tells a `Sink` what happened
(transitions, decisions, suppressions, ignored alerts). Replay drives it from files; the
embedded runtime drives it from watches and webhooks and hands decisions to executors.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from remediator.contract.decision import Decision, Suppressed
from remediator.guard import GuardState, build_pipeline, engage
from remediator.inputs.records import EngineStep, Input, Relisted
from remediator.metrics.export import TimelineMetrics
from remediator.policy.engine import PolicyEngine
from remediator.policy.outcome import Ignored, Outcome
from remediator.policy_file import PolicyFile, load_policy_file
from remediator.timeline.tracker import StateChange, Tracker


class Sink(Protocol):
    def transition(self, change: StateChange) -> None: ...
    def decision(self, decision: Decision) -> None: ...
    def suppressed(self, suppressed: Suppressed) -> None: ...
    def ignored(self, ignored: Ignored) -> None: ...


class Session:
    def __init__(
        self, policy: PolicyFile | None = None, registry: CollectorRegistry | None = None
    ) -> None:
        self.policy = policy if policy is not None else PolicyFile()
        self.tracker = Tracker(self.policy.rules.stuck_pod.engine_containers)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = TimelineMetrics(self.registry)
        self.engine = PolicyEngine(self.policy.rules, self.tracker)
        self.pipeline = build_pipeline(self.policy.guardrails)
        self.guard_state = GuardState()
        self.now = 0.0
        self._decided = Counter(
            "remediator_decisions_total",
            "Decisions let through the guardrails, by action.",
            ["action"],
            registry=self.registry,
        )
        self._suppressed = Counter(
            "remediator_suppressed_total",
            "Decisions a guardrail stopped, by action and guardrail.",
            ["action", "guardrail"],
            registry=self.registry,
        )
        self._suppressed_children: dict[tuple[str, str], Counter] = {}
        self._decided_children: dict[str, Counter] = {}

    def _suppressed_child(self, action: str, guardrail: str) -> Counter:
        # prometheus-client's labels() validates and locks on every call: keep the children
        # (a held pod is looked at again each check interval: a settle per look).
        key = (action, guardrail)
        child = self._suppressed_children.get(key)
        if child is None:
            child = self._suppressed_children[key] = self._suppressed.labels(action, guardrail)
        return child

    def _decided_child(self, action: str) -> Counter:
        child = self._decided_children.get(action)
        if child is None:
            child = self._decided_children[action] = self._decided.labels(action)
        return child

    @classmethod
    def from_policy_file(cls, path: str | None) -> Session:
        return cls(load_policy_file(path) if path else PolicyFile())

    def feed(self, item: Input, out: Sink, watched: bool = True, now: float | None = None) -> None:
        """Apply one input at its own time (or the current time when it has none).
        `watched`: from the watch (or a recording); False for a webhook's, whose pods
        the tracker bounds (`Tracker.max_unwatched`). `now`: the time it arrived on the
        API server's clock, where the caller keeps one (the live runtime: `ClusterTime`);
        then the input's own times (a kubelet's, an alert's) never move the session's."""
        at = item.at if now is None else now
        if isinstance(item, Relisted):
            # What is gone goes first: no timer of a deleted pod fires on the way to the
            # list's time.
            self._relisted(item, out)
            if at is not None:
                self.advance(at, out)
            return
        if at is not None and at > self.now:
            self.advance(at, out)
        change = self.tracker.apply(item, self.now, watched)
        if change is not None:
            self.metrics.observe(change)
            out.transition(change)
        elif isinstance(item, EngineStep):
            t = self.tracker.timeline_of(item)
            if t is not None:
                self.metrics.init_steps(t)
                self.metrics.observe_steps(t)
        for outcome in self.engine.on_input(item, change, self.now):
            self._settle(outcome, self.now, out)
        if self.tracker.evicted:
            for uid in self.tracker.evicted:
                self.engine.forget(uid)
            self.tracker.evicted.clear()

    def _relisted(self, item: Relisted, out: Sink) -> None:
        changes = self.tracker.relisted(item, self.now)
        for change in changes:
            self.metrics.observe(change)
            out.transition(change)
        self.engine.relisted(item, changes)

    def advance(self, now: float, out: Sink) -> None:
        """Move the clock forward (never back), firing the policy's timers on the way."""
        if now <= self.now:
            return
        # One due time at a time: settling a decision may arm a retry that is due before `now`.
        while (due := self.engine.next_deadline()) is not None and due <= now:
            for at, outcome in self.engine.advance(due):
                self.now = max(self.now, at)
                self._settle(outcome, self.now, out)
        self.now = now

    def set_kill_switch(self, engaged: bool, note: str = "") -> None:
        self.guard_state = engage(self.guard_state, engaged, note)

    def restore_guard_state(self, text: str) -> None:
        """Guard state as stored by a runtime (`GuardState.to_json`)."""
        self.guard_state = self.pipeline.load_state(text)

    def _settle(self, outcome: Outcome, now: float, out: Sink) -> None:
        if isinstance(outcome, Ignored):
            out.ignored(outcome)
            return
        result, self.guard_state = self.pipeline.run(outcome, now, self.guard_state)
        if isinstance(result, Suppressed):
            self._suppressed_child(outcome.action, result.guardrail).inc()
            out.suppressed(result)
            if result.retry_at is not None:
                self.engine.retry_later(outcome, now, result.retry_at)
            return
        self._decided_child(result.action).inc()
        self.engine.acted(result, now)
        out.decision(result)
