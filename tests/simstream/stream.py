"""A realistic, deterministic watch stream of vLLM inference pods, with ground truth.

    for line, truth in watch_stream(pods=1000, seed=7):
        ...  # line: one watch event as JSON bytes; truth: what the core must report

Each pod goes ADDED (Pending, unscheduled) → MODIFIED (PodScheduled) → MODIFIED
(ContainerCreating) → MODIFIED (Running, started) → MODIFIED (Ready), interleaved in
time with its Events (Scheduled, Pulling, Pulled, Created, Started, Unhealthy,
FailedScheduling with count/series bumps) and with other pods' lifecycles. Pods and
Events come from separate watches on a real cluster; this is their merge by time.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass

import orjson

from tests.simstream.events import Occurrence, event_object
from tests.simstream.forms import created_message, pulled_message, started_message
from tests.simstream.plan import Planner, PodPlan, PodTruth
from tests.simstream.pods import CONTAINER, pod_object

_US = 1_000_000


@dataclass(frozen=True, slots=True)
class _Emit:
    """One watch event of one pod, rendered only when its turn comes."""

    watch: str  # ADDED | MODIFIED
    stage: str | None  # a pod stage, or None for an Event
    event: Occurrence | None


def watch_stream(
    pods: int, seed: int = 0, duplicates: float = 0.0, **force: str
) -> Iterator[tuple[bytes, PodTruth]]:
    """Yield (watch-event line, truth of the pod it is about), in time order.

    `duplicates` re-sends that fraction of pod events (a watch that reconnects re-lists).
    `force` pins a plan choice for every pod: scenario, pull_form, created_form,
    events_api ("core" | "new"). Memory stays bounded by the pods alive at one time."""
    planner = Planner(seed)
    dup = random.Random(seed ^ 0x5EED)
    heap: list[tuple[int, int, PodPlan, _Emit]] = []
    seq = rv = 0
    next_plan = planner.next(0, **force) if pods else None
    made = 1
    while heap or next_plan is not None:
        if next_plan is not None and (not heap or next_plan.created * _US <= heap[0][0]):
            for at, emit in lifecycle(next_plan):
                seq += 1
                heapq.heappush(heap, (at, seq, next_plan, emit))
            next_plan = planner.next(made, **force) if made < pods else None
            made += 1
            continue
        _, _, plan, emit = heapq.heappop(heap)
        rv += 1
        line = render(plan, emit, 1_000 + rv)
        truth = plan.truth()
        yield line, truth
        if emit.stage is not None and duplicates and dup.random() < duplicates:
            yield line, truth


def tracked_pods(pods: int, seed: int = 0) -> Iterator[bytes]:
    """ADDED (Pending) then MODIFIED (Ready, or Running if stuck) per pod, pod after pod:
    the cheapest stream that leaves every pod tracked (for memory measurements)."""
    planner = Planner(seed, scenario_weights=(70, 20, 5, 5, 0))
    for i in range(pods):
        plan = planner.next(i)
        yield render(plan, _Emit("ADDED", "pending", None), 2 * i + 1)
        last = "ready" if plan.ready is not None else "running"
        yield render(plan, _Emit("MODIFIED", last, None), 2 * i + 2)


def render(plan: PodPlan, emit: _Emit, resource_version: int) -> bytes:
    if emit.stage is not None:
        obj = pod_object(plan, emit.stage, resource_version)
    else:
        assert emit.event is not None
        obj = event_object(plan, emit.event, resource_version)
    return orjson.dumps({"type": emit.watch, "object": obj})


def lifecycle(p: PodPlan) -> list[tuple[int, _Emit]]:
    """Every watch event of the pod with the microsecond it reaches the watch."""
    r = random.Random(f"{p.uid}")
    c = p.created * _US
    out = [(c + r.randrange(1_000, 50_000), _Emit("ADDED", "pending", None))]
    if p.scheduled is None:
        out.append((c + r.randrange(60_000, 200_000), _Emit("MODIFIED", "unschedulable", None)))
        return out + _repeated(r, p, "FailedScheduling", _UNSCHEDULABLE, c + 100_000,
                               p.failed_scheduling, 30, "default-scheduler")  # fmt: skip
    assert p.started is not None and p.container_created is not None
    s = p.scheduled * _US + r.randrange(0, 900_000)
    out += [
        (s + 10_000, _Emit("MODIFIED", "scheduled", None)),
        (s + 20_000, _ev(p, "Scheduled", _assigned(p), s, None, "default-scheduler")),
        ((p.scheduled + 1) * _US + r.randrange(_US), _Emit("MODIFIED", "creating", None)),
    ]
    out += _pull_events(r, p)
    k = "kubelet"
    started_at = p.started * _US + r.randrange(_US)
    created_at = min(p.container_created * _US + r.randrange(_US), started_at - 50_000)
    created_msg = created_message(p.created_form, CONTAINER)
    started_msg = started_message(p.created_form, CONTAINER)
    out += [
        (created_at, _ev(p, "Created", created_msg, created_at, CONTAINER, k)),
        (started_at, _ev(p, "Started", started_msg, started_at, CONTAINER, k)),
        (started_at + 300_000, _Emit("MODIFIED", "running", None)),
    ]
    if p.unhealthy:
        first = started_at + 30 * _US
        out += _repeated(r, p, "Unhealthy", _probe_failed(p), first, p.unhealthy, 5, k)
    if p.ready is not None:
        out.append(
            (p.ready * _US + r.randrange(100_000, 900_000), _Emit("MODIFIED", "ready", None))
        )
    return out


def _pull_events(r: random.Random, p: PodPlan) -> list[tuple[int, _Emit]]:
    assert p.scheduled is not None
    msg = pulled_message(p.pull_form, p.image, p.pull_ns, p.waiting_ns, p.image_size)
    if p.pull_form == "present":
        at = (p.scheduled + 1) * _US + r.randrange(_US)
        return [(at, _ev(p, "Pulled", msg, at, CONTAINER, "kubelet"))]
    assert p.pulling is not None and p.pulled is not None
    out = []
    if p.pulling_seen:
        at = p.pulling * _US + r.randrange(_US)
        out.append((at, _ev(p, "Pulling", f'Pulling image "{p.image}"', at, CONTAINER, "kubelet")))
    at = p.pulled * _US + r.randrange(_US)
    out.append((at, _ev(p, "Pulled", msg, at, CONTAINER, "kubelet")))
    return out


def _ev(p: PodPlan, reason: str, msg: str, at: int, container: str | None, comp: str) -> _Emit:
    return _Emit("ADDED", None, Occurrence(reason, msg, at, at, 1, comp, container))


def _repeated(
    r: random.Random,
    p: PodPlan,
    reason: str,
    msg: str,
    first: int,
    times: int,
    every: int,
    component: str,
) -> list[tuple[int, _Emit]]:
    """An Event recorded `times` times: ADDED once, then MODIFIED with count/series bumps."""
    out, last = [], first
    container = CONTAINER if component == "kubelet" else None
    for n in range(1, times + 1):
        occ = Occurrence(reason, msg, first, last, n, component, container, warning=True)
        out.append((last + 5_000, _Emit("ADDED" if n == 1 else "MODIFIED", None, occ)))
        last += every * _US + r.randrange(_US)
    return out


def _assigned(p: PodPlan) -> str:
    return f"Successfully assigned {p.namespace}/{p.name} to {p.node}"


def _probe_failed(p: PodPlan) -> str:
    return (
        f'Readiness probe failed: Get "http://10.244.{p.index % 250}.{(p.index // 250) % 250 + 2}'
        ':8000/health": dial tcp: connect: connection refused'
    )


_UNSCHEDULABLE = (
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
    "available: 8 No preemption victims found for incoming pod."
)
