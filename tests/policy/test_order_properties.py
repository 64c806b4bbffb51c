"""Property: decisions do not depend on input order, as timelines already do not.

Any subset of a pod's real-shaped inputs (Pod objects through its life, kubelet and
scheduler Events, init containers, a restart, a back-off, finished and terminating
objects), fed in any order with duplicates, then the clock run on: the same decisions,
at the same times, for the same reasons, as in the order they happened.

The inputs all fall in the first 50 s, before any budget can lapse (engine_init's 60 s plus
checks is the shortest): what is decided is then decided on the whole picture, and only
the order that built it differs. Pod objects carry resourceVersions as the API server
gives them, which is how "the newest object" is told when two show the same times.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.inputs.timefmt import format_time
from tests.policy.builders import T0, event, pod
from tests.policy.conftest import RELAXED, make_run

UID = "11111111-2222-3333-4444-555555555555"


def _versioned(doc: dict[str, Any], rv: int) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["object"]["metadata"]["resourceVersion"] = str(rv)
    return doc


def _with(doc: dict[str, Any], **status: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    for key, value in status.items():
        if key == "deletionTimestamp":
            doc["object"]["metadata"][key] = value
        else:
            doc["object"]["status"][key] = value
    return doc


def _init_pod(doc: dict[str, Any], running: bool) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["object"]["spec"]["initContainers"] = [{"name": "storage-initializer", "image": "s"}]
    state = {"running": {"startedAt": format_time(T0 + 3)}} if running else {"waiting": {}}
    doc["object"]["status"]["initContainerStatuses"] = [
        {"name": "storage-initializer", "restartCount": 0, "state": state}
    ]
    return doc


def _init_event(reason: str, at: float) -> dict[str, Any]:
    doc = event(reason, f"{reason} storage-initializer", at, name=f"init.{reason}")
    doc["object"]["involvedObject"]["fieldPath"] = "spec.initContainers{storage-initializer}"
    return doc


def _sidecar_started(at: float) -> dict[str, Any]:
    doc = event("Started", "Started container", at, name="side.started")
    doc["object"]["involvedObject"]["fieldPath"] = "spec.containers{metrics}"
    return doc


_RESTARTED = {
    "name": "vllm",
    "restartCount": 1,
    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    "lastState": {"terminated": {"startedAt": format_time(T0 + 30), "exitCode": 1}},
}
_PLAIN = [
    pod(watch="ADDED", created=0),
    event("Scheduled", "Successfully assigned llm/x to gpu-node-1", 1),
    pod(created=0, scheduled=1, waiting="ContainerCreating"),
    event("Pulling", 'Pulling image "vllm"', 2),
    event("BackOff", 'Back-off pulling image "vllm"', 9, first=5, count=3),
    pod(created=0, scheduled=1, waiting="ImagePullBackOff"),
    event("Pulled", 'Successfully pulled image "vllm" in 18s', 20),
    pod(created=0, scheduled=1, waiting="ContainerCreating"),
    _sidecar_started(25),
    event("Started", "Started container vllm", 30, name="vllm.started"),
    pod(created=0, scheduled=1, started=30),
    _with(pod(created=0, scheduled=1, started=30), containerStatuses=[_RESTARTED]),
    _with(pod(created=0, scheduled=1, started=30), phase="Failed"),
    _with(pod(created=0, scheduled=1, started=30), deletionTimestamp=format_time(T0 + 45)),
]
_INIT = [
    _init_pod(pod(watch="ADDED", created=0), running=False),
    event("Scheduled", "Successfully assigned llm/x to gpu-node-1", 1),
    _init_event("Pulling", 2),
    _init_event("Started", 3),
    _init_pod(pod(created=0, scheduled=1, waiting="PodInitializing"), running=True),
    _with(
        _init_pod(pod(created=0, scheduled=1, waiting="PodInitializing"), running=True),
        phase="Succeeded",
    ),
]
POOLS = [
    [_versioned(d, i + 1) for i, d in enumerate(_PLAIN)],
    [_versioned(d, i + 1) for i, d in enumerate(_INIT)],
]


def _decide(docs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    run = make_run(RELAXED).feed(*docs).at(T0 + 7200)
    return [(d.action, d.target, d.uid, d.incident, d.at, d.reason) for d in run.decisions]


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pool = draw(st.sampled_from(POOLS))
    picked = sorted(draw(st.sets(st.integers(0, len(pool) - 1), min_size=1)))
    happened = [pool[i] for i in picked]
    dups = draw(st.lists(st.sampled_from(happened), max_size=len(happened)))
    shuffled = draw(st.permutations(happened + dups))
    return happened, list(shuffled)


@settings(max_examples=400, deadline=None)
@given(_scenario())
def test_any_order_of_the_same_inputs_gives_the_same_decisions(
    scenario: tuple[list[dict[str, Any]], list[dict[str, Any]]],
) -> None:
    happened, shuffled = scenario
    assert _decide(shuffled) == _decide(happened)


def test_the_pools_decide_something() -> None:
    """The property is not vacuous: whole pools and parts of them do decide."""
    assert _decide(POOLS[0][:3]) != []  # scheduled, ContainerCreating: deleted in time
    assert _decide(POOLS[1][:5]) != []  # init running: told after its budget
    assert _decide(POOLS[0]) == []  # terminating at the end: never acted on
    assert _decide(POOLS[1]) == []  # Succeeded: never acted on
