"""The decider: inputs + now → candidate decisions and timers. No guardrails, no I/O.

It is the tracker (per-pod timelines), the timeline metrics and the policy engine. It
emits `Candidate`s and learns from `Feedback` (what got through, what to look at again);
it never judges its own candidates. `Session` wires it to a `Guard` in one process; the
Kafka runtime runs one per input partition and sends its candidates to a guard
elsewhere.

The caller moves time: `fire(due)` settles the timers due at one instant (a candidate's
feedback may arm another due before the next), `move_to(now)` sets the clock, and
`apply(item)` applies an input at the decider's time. `feed` does all three for a
caller that guards elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from remediator.contract.decision import Decision
from remediator.contract.records import (
    Candidate,
    Feedback,
    GotThrough,
    HeldBehind,
    Learned,
    RetryAt,
)
from remediator.inputs.records import EngineSpan, EngineStep, Input, Relisted
from remediator.metrics.export import TrackerCollector
from remediator.metrics.timeline_metrics import TimelineMetrics
from remediator.policy.engine import PolicyEngine
from remediator.policy.history import PhaseHistory
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile
from remediator.timeline.tracker import StateChange, Tracker

__all__ = [
    "Decider",
    "DeciderSink",
    "Settle",
    "TimelineMetrics",
    "node_pace_gauges",
    "timeline_metrics",
    "tracker_gauges",
]


class DeciderSink(Protocol):
    """What the decider tells besides its candidates."""

    def transition(self, change: StateChange) -> None: ...
    def ignored(self, ignored: Ignored) -> None: ...


Settle = Callable[[Candidate], None]


def tracker_gauges(deciders: Callable[[], Iterable[Decider]]) -> Collector:
    """The gauges read off the deciders' trackers at scrape time (pods per phase, each
    unfinished pod's time in its phase, nodes' clock skew), summed over `deciders()`: a
    Kafka worker's partitions, as serve's one session."""
    return TrackerCollector.of_many(lambda: [(d.tracker, d.now) for d in deciders()])


class _NodePaces(Collector):
    def __init__(self, deciders: Callable[[], Iterable[Decider]]) -> None:
        self._deciders = deciders

    def collect(self) -> Iterable[Metric]:
        gauge = GaugeMetricFamily(
            "remediator_node_engine_pace",
            "How the last healthy cold starts on a node ran engine init against their "
            "siblings' median (1: as fast; 3: three times as long; the lower median of three): a "
            "slow node (a throttled GPU, a slow disk), which stall limits there wait out.",
            labels=["node"],
        )
        paces: dict[str, float] = {}
        for decider in self._deciders():
            for node, pace in decider.engine.node_paces.known():
                paces[node] = max(pace, paces.get(node, 0.0))
        for node, pace in sorted(paces.items()):
            gauge.add_metric([node], pace)
        yield gauge


def node_pace_gauges(deciders: Callable[[], Iterable[Decider]]) -> Collector:
    """The pace of each node's last cold starts (`policy.pace.NodePaces`), the largest any of
    `deciders()` knows (a Kafka worker's partitions each see their own pods)."""
    return _NodePaces(deciders)


def timeline_metrics(
    registry: CollectorRegistry | None = None, wall: Callable[[], float] | None = None
) -> TimelineMetrics:
    """Cold-start metrics for deciders to share (one set per process), on `registry`
    (None: a registry of their own, exported nowhere). `wall`: the runtime's wall clock,
    for each series' `_created` (the core reads none)."""
    return TimelineMetrics(registry if registry is not None else CollectorRegistry(), wall)


class _Recording(PhaseHistory):
    """The engine's history, keeping what it learns for a guard elsewhere (`learned`)."""

    def __init__(self, window: int) -> None:
        super().__init__(window)
        self.fresh: list[tuple[str, str, float]] = []

    def add(self, model: str, phase: str, seconds: float) -> None:
        super().add(model, phase, seconds)
        self.fresh.append((model, phase, seconds))

    def heard(self, model: str, phase: str, seconds: float) -> None:
        """Learned by another decider: kept, not passed on again."""
        super().add(model, phase, seconds)


class Decider:
    """`metrics`: the timeline metrics to observe into (several deciders of one process
    share one), else new ones on `registry` (`wall`: as `timeline_metrics`). `keep_learned`:
    keep each finished cold start's phases for `learned()` (a guard in another process
    weighs by them)."""

    def __init__(
        self,
        policy: PolicyFile,
        registry: CollectorRegistry | None = None,
        *,
        metrics: TimelineMetrics | None = None,
        keep_learned: bool = False,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.policy = policy
        self.tracker = Tracker(policy.rules.stuck_pod.engine_containers)
        if metrics is None:
            metrics = timeline_metrics(registry, wall)
        self.metrics = metrics
        self.engine = PolicyEngine(policy.rules, self.tracker)
        self._learning: _Recording | None = None
        if keep_learned:
            self._learning = _Recording(policy.rules.stuck_pod.adaptive.window)
            self.engine.history = self._learning
        self.now = 0.0
        # Pod deletions held while the picture lagged (by pod): `caught_up` looks again.
        self.held_behind: dict[str, Decision] = {}

    def learned(self) -> tuple[tuple[str, str, float], ...]:
        """(model, phase, seconds) learned since the last call (`keep_learned`)."""
        if self._learning is None or not self._learning.fresh:
            return ()
        fresh, self._learning.fresh = self._learning.fresh, []
        return tuple(fresh)

    def learn(self, record: Learned) -> None:
        """Cold starts another decider learned (a guard relays them): the history budgets
        are judged by (adaptive budgets, "too tight" holds) is the cluster's, as in one
        process, not only this decider's pods'."""
        history = self.engine.history
        for model, phase, seconds in record.samples:
            if isinstance(history, _Recording):
                history.heard(model, phase, seconds)
            else:
                history.add(model, phase, seconds)

    def prune(self, grace_s: float) -> list[tuple[str, str]]:
        """Forget deleted pods `grace_s` after they ended, as the embedded runtime does;
        their (namespace, name)."""
        gone: list[tuple[str, str]] = []
        self.tracker.prune(self.now, grace_s, gone)
        return gone

    # ---- time ------------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        return self.engine.next_deadline()

    def fire(self, due: float, out: DeciderSink, settle: Settle) -> None:
        """The timers due by `due`, each settled at its own time (never before `now`)."""
        for at, outcome in self.engine.advance(due):
            if at > self.now:
                self.now = at
            if isinstance(outcome, Ignored):
                out.ignored(outcome)
            else:
                settle(self._candidate(outcome, self.now))

    def advance(self, now: float, out: DeciderSink, settle: Settle) -> None:
        """Move the clock forward (never back), firing the timers on the way: one due time
        at a time, since settling one may arm a retry due before `now`."""
        if now <= self.now:
            return
        while (due := self.engine.next_deadline()) is not None and due <= now:
            self.fire(due, out, settle)
        self.now = now

    # ---- inputs ----------------------------------------------------------------------
    def feed(
        self,
        item: Input,
        out: DeciderSink,
        settle: Settle,
        watched: bool = True,
        now: float | None = None,
    ) -> None:
        """Apply one input at its own time (or the current time when it has none).
        `watched`: from the watch (or a recording); False for a webhook's, whose pods the
        tracker bounds (`Tracker.max_unwatched`). `now`: the time it arrived on the API
        server's clock, where the caller keeps one (the live runtime: `ClusterTime`); then
        the input's own times (a kubelet's, an alert's) never move the decider's."""
        at = item.at if now is None else now
        if type(item) is Relisted:  # (input kinds are final: inputs/records.py)
            # What is gone goes first: no timer of a deleted pod fires on the way to the
            # list's time.
            self.relisted(item, out)
            if at is not None:
                self.advance(at, out, settle)
            return
        if at is not None and at > self.now:
            self.advance(at, out, settle)
        self.apply(item, out, settle, watched)

    def apply(self, item: Input, out: DeciderSink, settle: Settle, watched: bool = True) -> None:
        """One input at the decider's current time."""
        now = self.now
        change = self.tracker.apply(item, now, watched)
        if change is not None:
            self.metrics.observe(change)
            out.transition(change)
        elif type(item) is EngineStep or type(item) is EngineSpan:
            t = self.tracker.timeline_of(item)
            if t is not None:
                self.metrics.init_steps(t)
                self.metrics.observe_steps(t)
        for outcome in self.engine.on_input(item, change, now):
            if isinstance(outcome, Ignored):
                out.ignored(outcome)
            else:
                settle(self._candidate(outcome, now))
        if self.tracker.evicted:
            for uid in self.tracker.evicted:
                self.engine.forget(uid)
            self.tracker.evicted.clear()

    def relisted(self, item: Relisted, out: DeciderSink) -> None:
        changes = self.tracker.relisted(item, self.now)
        for change in changes:
            self.metrics.observe(change)
            out.transition(change)
        self.engine.relisted(item, changes, self.now)

    # ---- feedback --------------------------------------------------------------------
    @staticmethod
    def remembers(record: GotThrough) -> tuple[str, str] | bool:
        """What a let-through record leaves in a decider that does not hold its pod
        (`PolicyEngine.remembers`): a later record with the same key makes it forgotten;
        False, nothing; True, kept for good."""
        return PolicyEngine.remembers(record.decision, record.phase)

    def feedback(self, record: Feedback) -> None:
        """What the guard did with a candidate: let through (acted or dry: the kill-loop
        guard remembers the deletion either way), "look again then", or held until the
        picture has caught up (`caught_up`)."""
        if isinstance(record, GotThrough):
            self.engine.acted(record.decision, record.at, record.phase)
        elif isinstance(record, HeldBehind):
            if record.decision.uid:  # (the guard holds only decisions about a pod)
                self.held_behind[record.decision.uid] = record.decision
        else:
            self._retry(record)

    def _retry(self, record: RetryAt) -> None:
        if record.sooner:
            self.engine.look_sooner(record.decision, record.at, record.not_before)
        else:
            self.engine.retry_later(record.decision, record.at, record.not_before, record.queued)

    def caught_up(self, out: DeciderSink, settle: Settle) -> None:
        """The picture has caught up with the cluster's: every pod deletion held meanwhile
        is looked at again now (`look_again_now`), on the fresh picture."""
        if self.held_behind:
            held, self.held_behind = list(self.held_behind.values()), {}
            self.look_again_now(held, out, settle)

    def look_again(self, record: RetryAt, out: DeciderSink, settle: Settle) -> None:
        """A "not yet" that arrives after the decider's clock ran on (from a guard in
        another process): arm the retry and fire it at once if already due, as made no
        earlier than the record's time."""
        self._retry(record)
        for due, outcome in self.engine.advance(self.now):
            if isinstance(outcome, Ignored):
                out.ignored(outcome)
            else:
                settle(self._candidate(outcome, max(due, record.at), record.partition))

    def look_again_now(
        self, decisions: Iterable[Decision], out: DeciderSink, settle: Settle
    ) -> None:
        """Held decisions whose reason to wait is over (the watch has caught up): each pod
        is looked at again now, on the picture as it is now, not a check interval later."""
        for decision in decisions:
            self.engine.retry_later(decision, self.now, self.now, at_once=True)
        for due, outcome in self.engine.advance(self.now):
            if isinstance(outcome, Ignored):
                out.ignored(outcome)
            else:
                settle(self._candidate(outcome, due))

    def _candidate(self, decision: Decision, at: float, partition: int = 0) -> Candidate:
        phase = self.engine.deciding(decision.uid) if decision.action == "delete-pod" else None
        # Its model: how old is old enough, and what a hedge costs, by its own cold starts.
        t = self.tracker.get(decision.uid) if decision.uid else None
        model = t.model if t is not None else None
        return Candidate(
            decision, at, partition, model, phase, once=self.engine.tells_once(decision)
        )
