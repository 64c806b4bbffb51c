"""Pods known from webhooks alone are bounded (issue 10, #11): anyone with the webhook token
could otherwise post made-up pods until memory runs out. The oldest are forgotten first,
counted; pods the watch has seen are never counted against the bound."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.records import PodSeen
from remediator.metrics.export import TrackerCollector
from remediator.policy.outcome import Ignored
from remediator.policy_file import load_policy
from remediator.session import Session
from remediator.timeline.tracker import StateChange, Tracker
from tests.timeline.test_prune import T0, event, seen

POLICY = """
stuck_pod:
  budgets: {engine_init: 60}
  checks: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
guardrails:
  rate_limit: {per_minute: 600, burst: 100}
"""


def stuck(uid: str) -> PodSeen:
    return seen(uid, "ADDED", T0, created=T0 - 10, scheduled=T0 - 9, started=T0)


def test_the_oldest_webhook_only_pods_are_forgotten_beyond_the_bound() -> None:
    tracker = Tracker()
    tracker.max_unwatched = 3
    for i in range(5):
        tracker.apply(stuck(f"hook-{i}"), T0, watched=False)
    assert sorted(t.uid for t in tracker) == ["hook-2", "hook-3", "hook-4"]
    assert tracker.unwatched == 3 and tracker.unwatched_dropped == 2
    assert sum(tracker.in_state.values()) == 3  # the counts went with them


def test_pods_the_watch_has_seen_are_never_forgotten_for_it() -> None:
    tracker = Tracker()
    tracker.max_unwatched = 2
    for i in range(3):
        tracker.apply(stuck(f"watched-{i}"), T0)
    tracker.apply(stuck("hook-0"), T0, watched=False)
    tracker.apply(stuck("hook-0"), T0)  # then the watch saw it too: no longer webhook-only
    tracker.apply(stuck("watched-0"), T0, watched=False)  # a webhook repeats a watched pod
    for i in range(1, 4):
        tracker.apply(stuck(f"hook-{i}"), T0, watched=False)
    kept = {t.uid for t in tracker}
    assert {"watched-0", "watched-1", "watched-2", "hook-0"} <= kept
    assert kept - {"watched-0", "watched-1", "watched-2", "hook-0"} == {"hook-2", "hook-3"}
    assert tracker.unwatched_dropped == 1


def test_orphan_events_from_webhooks_count_too() -> None:
    tracker = Tracker()
    tracker.max_unwatched = 1
    tracker.apply(event("a", T0), T0, watched=False)
    tracker.apply(event("b", T0), T0, watched=False)
    assert [t.name for t in tracker] == ["b"] and tracker.unwatched_dropped == 1


class Out:
    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        pass

    def ignored(self, ignored: Ignored) -> None:
        pass


def test_a_forgotten_pod_is_never_acted_on_and_the_metrics_say_so() -> None:
    registry = CollectorRegistry()
    session = Session(load_policy(POLICY), registry)
    registry.register(TrackerCollector(session.tracker, lambda: session.now))
    session.tracker.max_unwatched = 2
    out = Out()
    for i in range(3):
        session.feed(stuck(f"hook-{i}"), out, watched=False)
    session.advance(T0 + 3600, out)
    assert sorted(d.uid or "" for d in out.decisions) == ["hook-1", "hook-2"]
    assert "hook-0" not in session.engine._armed
    assert registry.get_sample_value("remediator_unwatched_pods") == 2
    assert registry.get_sample_value("remediator_unwatched_pods_dropped_total") == 1


def test_a_flood_of_forgotten_pods_leaves_no_timers_behind() -> None:
    session = Session(load_policy(POLICY))
    session.tracker.max_unwatched = 10
    out = Out()
    for i in range(5_000):
        session.feed(stuck(f"hook-{i}"), out, watched=False)
    assert len(session.tracker) == 10
    assert len(session.engine._timers) <= 2 * 10 + 1024 + 1
    session.advance(T0 + 3600, out)
    live = {f"hook-{i}" for i in range(4_990, 5_000)}
    assert out.decisions and {d.uid for d in out.decisions} <= live  # (the rest: guardrails)
