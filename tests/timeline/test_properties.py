"""Property-based: any order of a pod's inputs never crashes nor yields a negative phase, and
the facts the model keeps as min/max make the phases independent of the order.

Why exact equality holds: every phase is a difference of facts each kept as a min (created,
scheduled, first Pulling, Ready, first start, first token) or a max (last Pulled, the start
that preceded Ready) of what was seen, and a duplicate or a `count` bump re-sends the same
`firstTimestamp`. The facts of a restart (a second start, a re-pull) are told apart from
the cold start by the first start; they are kept in a small de-duplicated log and the cold
start is derived from it, so a restart is order-free too (the restart property below). (A
first token that arrives before its pod is kept by name until the pod shows.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.timeline import STATES, Tracker, timelines_from
from tests.timeline.streams import (
    COLD_START,
    COLD_START_TOTAL,
    IMAGE,
    MODEL,
    NODE,
    NS,
    POD,
    UID,
    at,
    cold_start,
    event,
    first_token,
    jsonl,
    new_event,
    pod,
    pulled,
    watch,
)

# The cold start, plus what a real watch also sends: a `count` bump of Pulled and of Pulling
# (same Event name, count 2, later lastTimestamp), the same facts through events.k8s.io/v1,
# and an Event without involvedObject.uid (the orphan/adoption path when it comes first).
_EXTRA = [
    watch(event("Pulled", pulled("3m2s", "3m2s", 9876543210), 195, last=250, count=2)),
    watch(event("Pulling", f'Pulling image "{IMAGE}"', 13, last=100, count=2)),
    watch(new_event("Pulled", pulled("3m2s", "3m2s"), 195, series=(3, 260))),
    watch(
        event(
            "Scheduled", f"Successfully assigned {NS}/{POD} to {NODE}", 12, uid=None, container=None
        )
    ),  # fmt: skip
    watch(pod(scheduled=12, started=289, ready=525)),  # a resync re-sends the same object
]
ITEMS = [*cold_start(), *_EXTRA]
LINES = [jsonl([o]) for o in ITEMS]
FIRST_TOKEN = len(cold_start()) - 1
assert ITEMS[FIRST_TOKEN]["kind"] == "FirstToken"

# A second pod whose first run crashed, and a recreation under the same name: inputs for
# the never-crash / never-negative property.
OTHER_UID, NEW_UID = "uid-crashy", "uid-recreated"
CRASHY = [
    watch(pod(uid=OTHER_UID, name="crashy", scheduled=2), "ADDED"),
    watch(event("Pulling", "Pulling image", 3, uid=OTHER_UID, name="crashy")),
    watch(event("Pulled", pulled("1m"), 63, uid=OTHER_UID, name="crashy")),
    watch(pod(uid=OTHER_UID, name="crashy", scheduled=2, started=70)),
    watch(
        event("BackOff", "Back-off restarting failed container", 90, uid=OTHER_UID, name="crashy")
    ),  # fmt: skip
    watch(event("Pulling", "Pulling image", 95, uid=OTHER_UID, name="crashy")),
    watch(event("Pulled", pulled("2s"), 97, uid=OTHER_UID, name="crashy")),
    watch(pod(uid=OTHER_UID, name="crashy", scheduled=2, started=99, restarts=1)),
    watch(pod(uid=OTHER_UID, name="crashy", scheduled=2, started=99, ready=180, restarts=1)),
    first_token(181, name="crashy"),
    watch(pod(uid=OTHER_UID, name="crashy", scheduled=2, started=99, ready=180), "DELETED"),
    watch(pod(uid=NEW_UID, name="crashy", created=200, scheduled=201), "ADDED"),
    watch(
        event(
            "Pulled",
            'Container image "x" already present on machine',
            202,
            uid=NEW_UID,
            name="crashy",
        )
    ),  # fmt: skip
    watch(event("Started", "Started container vllm", 203, uid=None, name="crashy")),
    watch(pod(uid=NEW_UID, name="crashy", created=200, scheduled=201, started=203, ready=290)),
    first_token(291, name="crashy", uid=NEW_UID),
    {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}},
]
ALL_LINES = LINES + [jsonl([o]) for o in CRASHY]


def _check_invariants(tracker: Tracker) -> None:
    for t in tracker:
        for name, value in t.phases().items():
            assert value is None or value >= 0.0, (t.uid, name, value)
        total = t.total()
        assert total is None or total >= 0.0
        assert t.state() in STATES
        assert t.restarts >= 0
    # The pods-per-state gauge always agrees with the timelines.
    assert tracker.in_state == dict(Counter((t.namespace, t.state()) for t in tracker))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(ALL_LINES) - 1), max_size=3 * len(ALL_LINES)))
def test_any_order_duplicates_and_drops_never_crash_nor_go_negative(picks: list[int]) -> None:
    tracker = timelines_from(ALL_LINES[i] for i in picks)
    _check_invariants(tracker)


def _multiset_orders() -> st.SearchStrategy[list[int]]:
    """Every input at least once (some twice), in any order: a first token found by pod name
    that comes before its pod is kept until the pod shows."""
    base = list(range(len(ITEMS)))
    dups = st.lists(st.sampled_from(base), max_size=len(base))
    return (
        st.tuples(st.permutations(base), dups)
        .map(lambda p: list(p[0]) + p[1])
        .flatmap(lambda order: st.permutations(order))
    )


@settings(max_examples=400, deadline=None)
@given(_multiset_orders())
def test_same_multiset_in_any_order_gives_the_same_timeline(order: list[int]) -> None:
    tracker = timelines_from(LINES[i] for i in order)
    _check_invariants(tracker)
    (t,) = tracker
    assert t.uid == UID
    assert t.phases() == COLD_START
    assert t.total() == COLD_START_TOTAL
    assert (t.state(), t.node, t.model, t.restarts) == ("serving", NODE, MODEL, 0)


# Random pods with random (possibly inconsistent) times: kubelet and API server clocks
# differ, watches relist, and nothing about the times is guaranteed.
_T = st.floats(min_value=0, max_value=1000, allow_nan=False).map(lambda x: round(x, 3))


@st.composite
def _random_input(draw: st.DrawFn) -> Any:
    uid = draw(st.sampled_from([UID, OTHER_UID, None]))
    name = POD if uid != OTHER_UID else "crashy"
    choice = draw(st.integers(0, 6))
    if choice == 0 or uid is None and choice == 1:
        return watch(
            pod(
                uid=uid or UID,
                name=name,
                created=draw(_T),
                scheduled=draw(st.none() | _T),
                started=draw(st.none() | _T),
                ready=draw(st.none() | _T),
                restarts=draw(st.integers(0, 3)),
                waiting=draw(st.sampled_from([None, "ContainerCreating", "ErrImagePull"])),
                phase=draw(st.sampled_from([None, "Pending", "Running", "Failed"])),
            ),
            draw(st.sampled_from(["ADDED", "MODIFIED", "DELETED"])),
        )
    if choice == 1:
        return first_token(draw(_T), uid=uid, name=name)
    reason, message = draw(
        st.sampled_from(
            [
                ("Scheduled", f"Successfully assigned {NS}/{name} to {NODE}"),
                ("FailedScheduling", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."),
                ("Pulling", f'Pulling image "{IMAGE}"'),
                ("Pulled", pulled("1m2.5s", "1h2m3.5s", 1)),
                ("Pulled", pulled("717ms")),
                ("Pulled", f'Successfully pulled image "{IMAGE}"'),
                ("Pulled", f'Container image "{IMAGE}" already present on machine'),
                ("Created", "Created container: vllm"),
                ("Started", "Started container vllm"),
                ("BackOff", f'Back-off pulling image "{IMAGE}"'),
                ("Killing", "Stopping container vllm"),
            ]
        )
    )
    first = draw(_T)
    if choice == 6:
        series = draw(st.none() | st.tuples(st.integers(2, 9), _T))
        return watch(new_event(reason, message, first, uid=uid, name=name, series=series))
    return watch(event(reason, message, first, last=first + draw(_T), uid=uid, name=name,
                       count=draw(st.integers(1, 5))))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(_random_input(), max_size=30))
def test_random_times_never_crash_nor_go_negative(objs: list[Any]) -> None:
    tracker = timelines_from(jsonl([o]) for o in objs)
    _check_invariants(tracker)


# The first run crashed during engine init (OOM); the kubelet re-pulled (imagePullPolicy
# Always) and the second run became Ready. Pod objects carry lastState as the API shows it.
_RESTART_UID = "uid-restart"


def _restarted(started: float, restarts: int, ready: float | None = None) -> Any:
    doc = pod(uid=_RESTART_UID, name="restart", scheduled=10, started=started, ready=ready,
              restarts=restarts)  # fmt: skip
    if restarts:
        doc["status"]["containerStatuses"][0]["lastState"] = {
            "terminated": {"startedAt": at(45), "exitCode": 137}
        }
    return doc


RESTART = [
    watch(pod(uid=_RESTART_UID, name="restart", scheduled=10), "ADDED"),
    watch(event("Pulling", "Pulling image", 11, uid=_RESTART_UID, name="restart")),
    watch(event("Pulled", pulled("30s"), 41, uid=_RESTART_UID, name="restart")),
    watch(event("Started", "Started container vllm", 45, uid=_RESTART_UID, name="restart")),
    watch(_restarted(45, 0)),
    watch(
        event(
            "Pulling",
            "Pulling image",
            200,
            uid=_RESTART_UID,
            name="restart",
            event_name="restart.pulling2",
        )
    ),  # fmt: skip
    watch(
        event(
            "Pulled",
            pulled("1s"),
            201,
            uid=_RESTART_UID,
            name="restart",
            event_name="restart.pulled2",
        )
    ),  # fmt: skip
    watch(
        event(
            "Started",
            "Started container vllm",
            205,
            uid=_RESTART_UID,
            name="restart",
            event_name="restart.started2",
        )
    ),  # fmt: skip
    watch(_restarted(205, 1)),
    watch(_restarted(205, 1, ready=400)),
]
RESTART_LINES = [jsonl([o]) for o in RESTART]


@settings(max_examples=300, deadline=None)
@given(st.permutations(range(len(RESTART))), st.lists(st.integers(0, len(RESTART) - 1)))
def test_a_restart_in_any_order_gives_the_same_cold_start(
    order: list[int], dups: list[int]
) -> None:
    tracker = timelines_from(RESTART_LINES[i] for i in [*order, *dups])
    _check_invariants(tracker)
    (t,) = tracker
    assert t.phases() == {
        "scheduling": 10.0,
        "init": None,
        "image_pull": 30.0,  # 41 − 11: the restart's re-pull is not the cold start's
        "container_start": 4.0,  # 45 − 41: the first start
        "engine_init": 195.0,  # 400 − 205: the run that became Ready
        "first_token": None,
    }
    assert (t.state(), t.restarts, t.total()) == ("ready", 1, 400.0)
