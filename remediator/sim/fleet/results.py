"""What one run of one policy did, scored against the simulator's ground truth."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from remediator.contract.decision import Decision

if TYPE_CHECKING:
    from remediator.sim.fleet.cluster import Pod, Slot
    from remediator.sim.fleet.simulation import Simulation
    from remediator.sim.fleet.tail import ReplicaStory

KILL_LOOP = 2  # one replica's healthy pods deleted this many times by remediation: a kill loop
SWIMLANE_SLOTS = 20  # replicas whose pods are kept for the swimlane plot


@dataclass(frozen=True, slots=True)
class Lane:
    """One pod's phases, for the swimlane of an incident."""

    pod: str
    slot: int
    created: float
    scheduled: float | None
    pull_start: float | None
    pulled: float | None
    started: float | None
    ready: float | None
    ended: float | None
    removed_by: str | None
    fate: str


@dataclass
class RunResult:
    policy: str
    scenario: str
    seed: int
    ready_s: list[float] = field(default_factory=list)  # per requested replica
    first_token_s: list[float] = field(default_factory=list)
    censored: int = 0  # replicas never Ready (by the end of the run, or before scaled away)
    cold_starts: int = 0  # pods created
    deletions: int = 0  # pods deleted by remediation
    false_kills: int = 0  # ... that would have become Ready
    kill_loops: int = 0  # replicas whose would-be-Ready pods remediation deleted KILL_LOOP times
    gpu_seconds: float = 0.0  # GPUs held by pods while cold-starting
    hedges: int = 0
    # GPUs a hedged replica's second pod held beside its first, surge to the hedge's end
    hedge_gpu_seconds: float = 0.0
    held: int = 0  # decisions a guardrail held
    actions: Counter[str] = field(default_factory=Counter)
    lanes: list[Lane] = field(default_factory=list)
    tail: list[ReplicaStory] = field(default_factory=list)  # its slowest replicas, told (--tail)
    _incident_slots: dict[int, list[Pod]] = field(default_factory=dict)

    # ---- fed by the simulation -----------------------------------------------------------
    def slot_ready(self, slot: Slot) -> None:
        assert slot.ready is not None
        self.ready_s.append(slot.ready - slot.requested)

    def slot_first_token(self, slot: Slot) -> None:
        assert slot.first_token is not None
        self.first_token_s.append(slot.first_token - slot.requested)

    def unserved(self, slot: Slot, now: float) -> None:
        """A replica scaled or rolled away before it was ever Ready: censored at `now`."""
        self.censored += 1
        self.ready_s.append(now - slot.requested)
        self.first_token_s.append(now - slot.requested)

    def cold_start(self, pod: Pod, end: float) -> None:
        if pod.scheduled is not None:
            self.gpu_seconds += (end - pod.scheduled) * pod.dep.spec.tp
        keep = self._incident_slots.get(pod.slot.id)
        if keep is not None:
            keep.append(pod)

    def remediated(self, pod: Pod) -> None:
        self.deletions += 1
        node = pod.node
        if pod.fate == "ok" and not (node is not None and node.unsettled):
            self.false_kills += 1
            pod.slot.false_kills += 1
            if pod.slot.false_kills == KILL_LOOP:
                self.kill_loops += 1
        if len(self._incident_slots) < SWIMLANE_SLOTS:
            self._incident_slots.setdefault(pod.slot.id, [])

    def action(self, d: Decision) -> None:
        self.actions[d.action] += 1

    def close(self, sim: Simulation, held: int) -> None:
        self.held = held
        self.cold_starts = sim.pods_made
        end = sim.end
        for dep in sim.deps:
            for pod in [*dep.pods.values(), *dep.old.values()]:
                if pod.ready is None:
                    self.cold_start(pod, end)
                slot = pod.slot
                if slot.ready is None and not slot.cancelled:
                    slot.ready = end  # censored: counted at the end, as a lower bound
                    self.censored += 1
                    self.ready_s.append(end - slot.requested)
                    self.first_token_s.append(end - slot.requested)
        for sid, pods in self._incident_slots.items():
            for p in pods:
                lane = Lane(p.name, sid, p.created, p.scheduled, p.pull_start, p.pulled,
                            p.started, p.ready, p.deleted, p.removed_by, p.fate)  # fmt: skip
                self.lanes.append(lane)
        self._incident_slots.clear()


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


@dataclass(frozen=True, slots=True)
class Summary:
    """One policy over every seed of a scenario."""

    policy: str
    scenario: str
    replicas: int
    ready: dict[str, float]  # p50, p95, p99, max, spread (p99 - p50)
    first_token: dict[str, float]
    censored: int
    cold_starts: int
    deletions: int
    false_kills: int
    false_kill_pct: float
    kill_loops: int
    gpu_minutes: float
    hedges: int
    hedge_gpu_minutes: float  # hedge_budget's bound: at most 5% of gpu_minutes by default
    held: int
    actions: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        # (its fields, not __slots__: compiled by mypyc, the class has none to read)
        return {"kind": "policy-summary", **{f.name: getattr(self, f.name) for f in fields(self)}}


def _stats(values: list[float]) -> dict[str, float]:
    p50, p99 = pct(values, 50), pct(values, 99)
    return {"p50": p50, "p95": pct(values, 95), "p99": p99,
            "max": max(values) if values else math.nan, "spread": p99 - p50}  # fmt: skip


def summarize(runs: list[RunResult]) -> Summary:
    ready = [v for r in runs for v in r.ready_s]
    first = [v for r in runs for v in r.first_token_s]
    cold = sum(r.cold_starts for r in runs)
    false = sum(r.false_kills for r in runs)
    actions: Counter[str] = Counter()
    for r in runs:
        actions.update(r.actions)
    return Summary(
        policy=runs[0].policy,
        scenario=runs[0].scenario,
        replicas=len(ready),
        ready=_stats(ready),
        first_token=_stats(first),
        censored=sum(r.censored for r in runs),
        cold_starts=cold,
        deletions=sum(r.deletions for r in runs),
        false_kills=false,
        false_kill_pct=100.0 * false / cold if cold else 0.0,
        kill_loops=sum(r.kill_loops for r in runs),
        gpu_minutes=sum(r.gpu_seconds for r in runs) / 60.0,
        hedges=sum(r.hedges for r in runs),
        hedge_gpu_minutes=sum(r.hedge_gpu_seconds for r in runs) / 60.0,
        held=sum(r.held for r in runs),
        actions=dict(sorted(actions.items())),
    )
