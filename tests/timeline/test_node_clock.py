"""A node's kubelet clock, proven off by the API server's own stamps (issue 18, #1).

The kubelet stamps a pod's status (starts, Ready) on its node's clock; the API server stamps
each write (`managedFields[].time`) on its own. A status is never written before it
happened, so kubelet time − write time bounds the node's skew from below: an hour ahead is
proven by the very write that carries it, without waiting for an Event. A webhook's word
proves nothing."""

from __future__ import annotations

import copy

import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.records import PodSeen
from remediator.inputs.stamps import api_server_time
from remediator.timeline import Tracker
from tests.timeline.streams import NODE, T0_EPOCH, at, pod, watch

HOUR = 3600.0


def written(doc: dict[str, object], when: float) -> dict[str, object]:
    """The builder's pod (copied: never its own object) with the API server's write stamp."""
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    assert isinstance(meta, dict)
    meta["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "subresource": "status", "time": at(when)},
        {"manager": "kube-controller-manager", "operation": "Update", "time": at(0)},
    ]
    return doc


def seen(doc: dict[str, object]) -> PodSeen:
    (item,) = decode(orjson.dumps(watch(doc)))
    assert isinstance(item, PodSeen)
    return item


def ahead_pod(skew: float) -> dict[str, object]:
    """Scheduled at 5 s (API server); its engine started at 20 s on the API server's clock,
    stamped by a kubelet `skew` off (its Initialized too); the API server wrote that status
    at 21 s."""
    doc = written(pod(created=0, scheduled=5, started=20 + skew), 21)
    status = doc["status"]
    assert isinstance(status, dict)
    for cond in status["conditions"]:
        if cond["type"] == "Initialized":
            cond["lastTransitionTime"] = at(6 + skew)
    return doc


def test_the_api_servers_stamps_are_told_from_the_kubelets() -> None:
    item = seen(ahead_pod(HOUR))
    assert item.written == T0_EPOCH + 21 and item.node_latest == T0_EPOCH + 20 + HOUR
    assert api_server_time(item) == T0_EPOCH + 21  # never the kubelet's hour-ahead start


@pytest.mark.parametrize("skew", [HOUR, -HOUR, 30.0])
def test_a_status_write_proves_its_nodes_skew_and_budgets_run_on_the_api_servers_clock(
    skew: float,
) -> None:
    tracker = Tracker()
    tracker.apply(seen(ahead_pod(skew)), T0_EPOCH + 21)
    (t,) = tracker
    assert t.clock_skew() == pytest.approx(skew, abs=1)
    assert t.state() == "engine_init"
    since = t.state_since()
    assert since is not None and T0_EPOCH + 20 <= since <= T0_EPOCH + 21  # never older
    assert tracker.node_skew == {NODE: pytest.approx(skew, abs=1)}
    assert tracker.skew_news == {NODE: pytest.approx(skew, abs=1)}


def test_a_correct_clock_is_not_called_off() -> None:
    tracker = Tracker()
    tracker.apply(seen(ahead_pod(0.9)), T0_EPOCH + 21)  # whole-second write stamps
    (t,) = tracker
    assert t.clock_skew() == 0.0 and tracker.node_skew == {}


def test_a_webhooks_pod_proves_nothing_of_a_nodes_clock() -> None:
    tracker = Tracker()
    tracker.apply(seen(ahead_pod(HOUR)), T0_EPOCH + 21, watched=False)
    (t,) = tracker
    assert t.skew_lo is None and tracker.node_skew == {}
