"""One process's core: the decider and the guard wired together over a clock it is given.

    inputs + now ──▶ Decider ──Candidate──▶ Guard ──▶ Sink (decision | suppressed)
                        ▲                     │
                        └───── Feedback ──────┘

The session does no I/O: it is fed inputs and times, and tells a `Sink` what happened
(transitions, decisions, suppressions, ignored alerts). Replay drives it from files; the
embedded runtime drives it from watches and webhooks and hands decisions to executors;
the simulator drives it in virtual time. The Kafka runtime runs the same two pieces
apart (`remediator.core`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import Candidate, GotThrough, Learned
from remediator.core.decider import Decider
from remediator.core.guard import Guard
from remediator.guard import GuardState, Pipeline
from remediator.inputs.records import Input
from remediator.metrics.timeline_metrics import TimelineMetrics
from remediator.policy.engine import PolicyEngine
from remediator.policy.history import expected_cold_start
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile, load_policy_file
from remediator.timeline.tracker import StateChange, Tracker


class Sink(Protocol):
    def transition(self, change: StateChange) -> None: ...
    def decision(self, decision: Decision) -> None: ...
    def suppressed(self, suppressed: Suppressed) -> None: ...
    def ignored(self, ignored: Ignored) -> None: ...


class Session:
    """`keeps_learned`: the runtime stores each finished cold start's phases and steps
    (`learned`) and gives them back after a restart (`restore_learned`), so budgets and
    the siblings' step times are not learned again from nothing. `wall`: the runtime's wall
    clock, where it serves `registry` (the histograms' `_created`)."""

    def __init__(
        self,
        policy: PolicyFile | None = None,
        registry: CollectorRegistry | None = None,
        *,
        keeps_learned: bool = False,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.policy = policy if policy is not None else PolicyFile()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.decider = Decider(self.policy, self.registry, keep_learned=keeps_learned, wall=wall)
        self.guard = Guard(self.policy.guardrails, self.registry)
        self._out: Sink | None = None  # the sink of the step under way
        self._settle_cb = self._settle
        self._caught_up = False  # the runtime said so: held deletions looked at again
        self._history_seen = 0  # the engine's history as `_reweigh` last saw it

    # The pieces, as callers and tests have always reached them.
    @property
    def tracker(self) -> Tracker:
        return self.decider.tracker

    @property
    def metrics(self) -> TimelineMetrics:
        return self.decider.metrics

    @property
    def engine(self) -> PolicyEngine:
        return self.decider.engine

    @property
    def pipeline(self) -> Pipeline:
        return self.guard.pipeline

    @property
    def guard_state(self) -> GuardState:
        return self.guard.state

    @guard_state.setter
    def guard_state(self, state: GuardState) -> None:
        self.guard.state = state

    @property
    def now(self) -> float:
        return self.decider.now

    @classmethod
    def from_policy_file(cls, path: str | None) -> Session:
        return cls(load_policy_file(path) if path else PolicyFile())

    def feed(self, item: Input, out: Sink, watched: bool = True, now: float | None = None) -> None:
        """Apply one input at its own time (or the current time when it has none).
        `watched`: from the watch (or a recording); False for a webhook's, whose pods
        the tracker bounds (`Tracker.max_unwatched`). `now`: the time it arrived on the
        API server's clock, where the caller keeps one (the live runtime: `ClusterTime`);
        then the input's own times (a kubelet's, an alert's) never move the session's."""
        self._out = out
        self.decider.feed(item, out, self._settle_cb, watched, now)
        self._tell_guard()

    def advance(self, now: float, out: Sink) -> None:
        """Move the clock forward (never back), firing the policy's timers on the way."""
        self._out = out
        self.decider.advance(now, out, self._settle_cb)
        self._tell_guard()
        if self._caught_up:
            self._caught_up = False
            self.decider.caught_up(out, self._settle_cb)

    def set_kill_switch(self, engaged: bool, note: str = "") -> None:
        self.guard.set_kill_switch(engaged, note)

    def set_behind(self, why: str | None) -> None:
        """While the picture may lag the cluster's (`why`), pod deletions are held and asked
        again once caught up (`why` None: at the next `advance`)."""
        self.guard.set_behind(why)
        self._caught_up = why is None and bool(self.decider.held_behind)

    def restore_guard_state(self, text: str) -> None:
        """Guard state as stored by a runtime (`GuardState.to_json`)."""
        self.guard.restore(text)

    def restore_through(self, through: Iterable[tuple[Decision, bool]]) -> None:
        """What got through before a restart, (decision, dry) as the state file's rows hold
        it, told to the decider again as the guard's feedback was: the kill-loop memory (a
        deletion per workload and phase, a budget told too tight) comes back with the guard
        state, so a restarted run decides what an unbroken one does (a replacement as slow
        as the pod deleted is held and told, not deleted in turn)."""
        for decision, dry in through:
            self.decider.feedback(GotThrough(decision, decision.at, dry, phase=decision.phase))

    def learned(self) -> tuple[tuple[str, str, float], ...]:
        """(model, phase, seconds) learned since the last call (`keeps_learned`), to store."""
        return self.decider.learned()

    def restore_learned(self, samples: tuple[tuple[str, str, float], ...]) -> None:
        """What a run before a restart learned (`learned`, as stored), oldest first: the
        history again, not learned anew (never handed back by `learned`)."""
        if samples:
            self.decider.learn(Learned(self.decider.now, 0, samples))

    def _tell_guard(self) -> None:
        """After each step: what the decider learned that the guard weighs by (GPU news,
        cold starts finished while pods are held until old enough). On every input: the
        engine is looked up once."""
        engine = self.decider.engine
        if engine.has_gpu_news:
            self.guard.hear(engine.take_gpu_news(), self.decider.now)
        if self.guard.aging and engine.history.changes != self._history_seen:
            self._reweigh()

    def _reweigh(self) -> None:
        """Cold starts finished while pods are held until as old as their model's expected
        cold start: each is looked at sooner where the estimate dropped, at the instant the
        guard over many partitions does when it hears of them (`streams.core.GuardCore`)."""
        cfg, history = self.policy.rules.stuck_pod, self.engine.history
        self._history_seen = history.changes
        models = {held.model for held in self.guard.aging.values()}
        cold = lambda model: expected_cold_start(cfg, history, model)  # noqa: E731
        for retry in self.guard.reweigh(models, self.decider.now, cold):
            self.decider.feedback(retry)

    def _settle(self, candidate: Candidate) -> None:
        out = self._out
        assert out is not None
        if self.engine.has_gpu_news:  # seen before this was decided: weighed, as on Kafka
            self.guard.hear(self.engine.take_gpu_news(), self.decider.now)
        result, feedback = self.guard.judge(candidate)
        if isinstance(result, Suppressed):
            out.suppressed(result)
        else:
            out.decision(result)
        if feedback is not None:
            self.decider.feedback(feedback)
