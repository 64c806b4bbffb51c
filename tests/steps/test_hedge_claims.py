"""Which new pod races for which hedge when a Deployment hedges two stalled pods at once
(steps/hedge.py): the pure part of the step, on pods as the API server lists them (their
uid, creation time and node). The step itself runs against the real API server in
tests/live/test_hedge.py; the order in which the scheduler places the two hedge pods, which
these pin down, is not the test's to choose there."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from remediator.inputs.hedge_annotation import Hedge
from remediator.steps.hedge import _from_before, _new, _racer


def _pod(uid: str, created: int, node: str | None = "gpu-node-0") -> Any:
    meta = SimpleNamespace(uid=uid, name=f"pod-{uid}", creation_timestamp=created,
                           deletion_timestamp=None)  # fmt: skip
    return SimpleNamespace(metadata=meta, spec=SimpleNamespace(node_name=node))


def test_a_second_hedge_counts_the_first_ones_hedge_pod_as_new() -> None:
    """A's hedge pod exists when B's hedge starts; B's pod is scheduled first and A's step
    names it its racer. B must still have one: A's hedge pod, not counted from before."""
    a, b, h_a, h_b = _pod("a", 0), _pod("b", 1), _pod("h-a", 10, None), _pod("h-b", 11)
    plan_a = Hedge("pod-a", "a", 2, ("a", "b"), 1e10)
    plan_b = Hedge("pod-b", "b", 2, _from_before([a, b, h_a], (plan_a,)), 1e10)
    assert plan_b.before == ("a", "b")
    fresh_a = _new(plan_a, (plan_a, plan_b), [a, b, h_a, h_b])
    plan_a = Hedge("pod-a", "a", 2, ("a", "b"), 1e10, racing=_racer(fresh_a, None))
    assert plan_a.racing == "h-b"  # (the only one with a node yet)
    h_a.spec.node_name = "gpu-node-1"
    plans = (plan_a, plan_b)
    fresh_b = _new(plan_b, plans, [a, b, h_a, h_b])
    assert [p.metadata.uid for p in fresh_b] == ["h-a"]
    assert _racer(fresh_b, None) == "h-a"
    # A keeps the pod it named (never traded look after look), both scheduled now.
    assert _racer(_new(plan_a, plans, [a, b, h_a, h_b]), plan_a.racing) == "h-b"


def test_two_entries_naming_one_racer_leave_it_to_the_one_written_first() -> None:
    a, b, h_1, h_2 = _pod("a", 0), _pod("b", 1), _pod("h-1", 10), _pod("h-2", 11)
    plan_a = Hedge("pod-a", "a", 2, ("a", "b"), 1e10, racing="h-1")
    plan_b = Hedge("pod-b", "b", 2, ("a", "b"), 1e10, racing="h-1")
    plans = (plan_a, plan_b)
    pods = [a, b, h_1, h_2]
    assert _racer(_new(plan_a, plans, pods), plan_a.racing) == "h-1"
    assert [p.metadata.uid for p in _new(plan_b, plans, pods)] == ["h-2"]
    assert _racer(_new(plan_b, plans, pods), plan_b.racing) == "h-2"


def test_with_no_hedge_running_every_pod_is_from_before() -> None:
    pods = [_pod("a", 0), _pod("b", 1), _pod("c", 2)]
    assert _from_before(pods, ()) == ("a", "b", "c")
