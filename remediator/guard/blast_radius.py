"""blast_radius: cap pod deletions per workload and cluster-wide per window.

Like NHC's `maxUnhealthy`: if many pods look stuck at once, the cause is more
likely the cluster (a registry, a driver, our own policy) than the pods, and
deleting them all turns a slow start into an outage. Per workload the cap is
min(max_pods, max_percent of its replicas); the percentage is rounded down, as
Kubernetes scales a percentage `maxUnhealthy` (round down), but never below one
so a one- or two-replica model can still be healed, one replica per window.
`max_percent: 0` means no deletions. With replicas unknown, one per window.

Hedges (`hedge-pod`) count as one each beside deletions: a hedge ends in a deletion (of
whichever pod loses), and many pods stalling at once is the same sign as many stuck. A pod
is counted once: its deletion after its own hedge (it went on to hang) is not counted again.

A replica is counted once, not each time its pod is replaced: the deletion of a pod found
stalled in a vLLM step its siblings got through (`Decision.stalled`), created after one of
its workload's deletions in the window, goes on from that deletion (the latest before the
pod was created, each gone on from once), as its replacement's. It is let through past the
workload's cap (the replica is counted already) and takes the count over from the deletion
it went on from. So the cap is on how many of the workload's replicas are being remediated
in the window, and a replica whose replacement hangs too is not held for the window behind
its own first deletion. In the simulator's random fleets with 20% of engine inits hung,
workloads of two or three replicas (cap 1) held such replacements ~600 s, up to 6x the seed
rule's P99 (bench/bench_random_fleets.py: 7 of the 22 fleets of 1-330 above the seed rule
come under it so, with no false kill or kill loop in any). Only a pod found stalled goes on:
judged by a phase budget alone, a replacement as slow as the pod it replaced may be a budget
too tight, not a hang, and deleted as soon as it is it would be a kill loop. (With every
deletion going on, the seed rule's 60 s budget on the untuned fleet,
tests/kafka/differential.py's kill-loop stream, deleted 242 pods where the window let 9
decisions through and held 18, and the policy's kill-loop hold, which weighs a pod against
the workload's latest deletion, never held one.) The cluster-wide cap counts every deletion.
A workload's deletion counts against its cap for `cold_starts` of its model's expected cold
start (its replacement's time to Ready, `Decision.expected_cold_start_s`), where that is shorter
than the window: a tuned model's replica healed in a minute is not being remediated ten
minutes on. Counted for the whole window, a workload of two or three replicas held a second
replica's hung pod ~600 s behind the first's (random fleets 106, 167, 259, 294, 314: P99
732-799 s against the seed rule's 210-388 s; 209-347 s counted for one cold start). A model
with no history yet counts for the window. The cluster-wide cap always counts the window: the
backstop against a policy wrong about every pod.
A deletion stops counting against its workload's cap once a pod of the workload created after
it is Ready (`Decision.ready_created`, the engine's word; each Ready pod stands for one
deletion): its replica is served again, and the workload's pods can start, which is what the
cap doubts. An expected cold start can hold far more than the replacement took: random fleet
219's two-replica TP8 Deployment held its second hung pod 338 s (a GPU wait in the model's
history) behind a deletion whose replacement was Ready in 40 s. A kill loop heals nothing (no
pod gets Ready), and the cluster-wide cap counts healed deletions still.
Both times compared are on the API server's clock (the pod's creationTimestamp, and the
guard's, which runs on the API server's time): a skewed kubelet clock moves neither.

A pod on a node whose GPU memory a verification found unsettled (`Decision.unsettled_node`)
is neither capped nor counted: the cause is known, and the pod, hung in engine init there,
serves nothing. Capped, its replacement (which lands on the same node: its GPUs are the
freest, its image is there) waited its turn behind every other: in the simulator, fleets
with four such nodes and no cordon had a P99 time to Ready above the seed rule's (tuned
1,334 s against 900 s; mixed TP 1,800 s against 1,125 s), and equal to it without the cap.
The rate limit still paces them; cordoning the node (`gpu_memory.cordon`) is the cure.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.guard.config import NON_NEGATIVE
from remediator.guard.stage import PASS, Verdict, deletes_pods, fmt_s, starts_pods, suppress
from remediator.guard.state import (
    GuardState,
    Stamps,
    prune,
    read_object,
    read_pairs,
    read_stamps,
)


@dataclass(frozen=True, slots=True)
class BlastRadiusConfig:
    # By simulation (docs/simulation-defaults.md): with 20% of cold starts hung, a 48-replica
    # workload's scale-up wave needs ~10 deletions in a window; lower caps hold them.
    max_pods: int = field(default=20, metadata=NON_NEGATIVE)
    max_percent: float = field(default=50.0, metadata={"min": 0, "max": 100})
    window_s: float = field(default=600.0, metadata=NON_NEGATIVE)
    max_pods_cluster: int = field(default=50, metadata=NON_NEGATIVE)  # by simulation
    # A workload's deletion counts against its cap for this many of its model's expected cold
    # starts (its replacement's), at most `window_s`; 0: the whole window.
    cold_starts: float = field(default=1.0, metadata=NON_NEGATIVE)


Deletion = tuple[str, float]  # (workload key, deleted or hedged at)


@dataclass(frozen=True, slots=True)
class BlastRadiusState:
    deletions: tuple[Deletion, ...] = ()  # oldest first
    hedged: Stamps = field(default_factory=dict)  # pod uid -> hedged at (counted then)
    # Deletions a replacement's deletion went on from (counted no more): each once.
    replaced: tuple[Deletion, ...] = ()

    def to_doc(self) -> Any:
        doc: dict[str, Any] = {"deletions": [list(d) for d in self.deletions]}
        if self.hedged:
            doc["hedged"] = dict(self.hedged)
        if self.replaced:  # (only then: the release before reads the record back otherwise)
            doc["replaced"] = [list(d) for d in self.replaced]
        return doc

    @classmethod
    def from_doc(cls, value: Any, path: str) -> BlastRadiusState:
        obj = read_object(value, path, {"deletions", "hedged", "replaced"})
        hedged = read_stamps({"hedged": obj["hedged"]}, path, "hedged") if "hedged" in obj else {}
        deletions = read_pairs(obj.get("deletions", []), f"{path}.deletions", "[workload, at]")
        replaced = read_pairs(obj.get("replaced", []), f"{path}.replaced", "[workload, at]")
        return cls(deletions, hedged, replaced)

    def counted(
        self, key: str, recent: tuple[Deletion, ...], ready: tuple[float, ...] = ()
    ) -> tuple[int, int, int]:
        """Of the workload's deletions in `recent`: those counted (each replica's latest,
        its replacement not Ready yet), those a replacement's deletion went on from (two in
        one second are two), and those healed by a pod of `ready` (the creation times of the
        workload's pods Ready lately) created after them."""
        mine = Counter(d for d in recent if d[0] == key)
        went = Counter(self.replaced)
        left = [d[1] for d, n in mine.items() for _ in range(n - min(n, went[d]))]
        healed = healed_by(left, ready)
        return len(left) - healed, mine.total() - len(left), healed

    def replaces(
        self, decision: Decision, key: str, recent: tuple[Deletion, ...]
    ) -> Deletion | None:
        """The deletion this pod's deletion goes on from, as its replacement's: the
        workload's latest in `recent` at or before the pod was created, not gone on from
        yet. None for a hedge, a pod whose creation time is unknown, or one not found
        stalled in a vLLM step its siblings got through (judged by a phase budget alone,
        a replacement as slow as its pod may be a kill loop: the window holds it)."""
        created = decision.pod_created_at
        if not deletes_pods(decision) or created is None or decision.stalled is None:
            return None
        mine = Counter(d for d in recent if d[0] == key and d[1] <= created)
        went = Counter(self.replaced)
        free = [d for d, n in mine.items() if n > went[d]]
        return max(free, key=lambda d: d[1]) if free else None


def healed_by(deletions: list[float], ready: tuple[float, ...]) -> int:
    """How many of `deletions` (times) a pod of `ready` (creation times) each, created after
    it, can stand for, one pod to a deletion: the latest deletion takes a pod first (any pod
    created after an earlier deletion was created after a later one too, so this is most)."""
    pods = sorted(ready, reverse=True)
    i = free = healed = 0
    for at in sorted(deletions, reverse=True):
        while i < len(pods) and pods[i] > at:
            free, i = free + 1, i + 1
        if free:
            free, healed = free - 1, healed + 1
    return healed


def workload_key(decision: Decision) -> str:
    """The owning workload, or the bare pod itself when it has no owner on record."""
    return decision.workload or f"{decision.namespace}/Pod/{decision.target}"


def percent_cap(max_percent: float, replicas: int | None) -> int:
    """Deletions max_percent of `replicas` allows: rounded down, at least 1 unless 0 %."""
    if max_percent == 0:
        return 0
    if replicas is None or replicas < 0:
        return 1  # unknown size: the least that still heals
    return max(1, math.floor(replicas * max_percent / 100))


def workload_cap(config: BlastRadiusConfig, replicas: int | None) -> int:
    return min(config.max_pods, percent_cap(config.max_percent, replicas))


def _counted(decision: Decision) -> bool:
    return (deletes_pods(decision) or starts_pods(decision)) and decision.unsettled_node is None


@dataclass(frozen=True, slots=True)
class BlastRadius:
    name: ClassVar[str] = "blast_radius"
    Config: ClassVar[type[Any]] = BlastRadiusConfig
    State: ClassVar[type[Any] | None] = BlastRadiusState
    simulates: ClassVar[bool] = False
    config: BlastRadiusConfig = BlastRadiusConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not _counted(decision) or self._hedged(decision, now, state):
            return PASS
        recent = self._recent(state, now)
        window = fmt_s(self.config.window_s)
        key = workload_key(decision)
        cap = workload_cap(self.config, decision.replicas)
        mine = state.of(self.name, BlastRadiusState)
        span, why = self._span(decision)
        in_span = tuple(d for d in recent if now - d[1] < span)
        counted, gone_on, healed = mine.counted(key, in_span, decision.ready_created)
        if counted >= cap and mine.replaces(decision, key, recent) is None:
            size = "unknown" if decision.replicas is None else str(decision.replicas)
            also = f", and {gone_on} of their replacements'" if gone_on else ""
            if healed:
                also += f" ({healed} more not counted: a pod of it created since is Ready)"
            return suppress(
                f"blast radius: {counted} pod deletion(s) or hedge(s) in {key} in the last "
                f"{fmt_s(span)}{why}{also}; cap {cap} (max_pods {self.config.max_pods}, "
                f"{self.config.max_percent:g}% of {size} replicas)",
                now,  # ask again at the next look: the window moves on
            )
        if len(recent) >= self.config.max_pods_cluster:
            return suppress(
                f"blast radius: {len(recent)} pod deletion(s) or hedge(s) cluster-wide in the "
                f"last {window}; "
                f"cap {self.config.max_pods_cluster} (max_pods_cluster)",
                now,
            )
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        if not _counted(decision) or self._hedged(decision, now, state):
            return state
        mine = state.of(self.name, BlastRadiusState)
        key, recent = workload_key(decision), self._recent(state, now)
        went_on = mine.replaces(decision, key, recent)
        replaced = tuple(d for d in mine.replaced if now - d[1] < self.config.window_s)
        if went_on is not None:
            replaced += (went_on,)
        hedged = prune(mine.hedged, now, self.config.window_s)
        if starts_pods(decision) and decision.uid:
            hedged[decision.uid] = now
        return state.put(self.name, BlastRadiusState((*recent, (key, now)), hedged, replaced))

    def _span(self, decision: Decision) -> tuple[float, str]:
        """How long a deletion of the decision's workload counts against its cap, and how
        that was set: while its replacement may still be cold-starting."""
        window, n = self.config.window_s, self.config.cold_starts
        cold = decision.expected_cold_start_s
        if not n or cold is None or cold <= 0 or n * cold >= window:
            return window, ""  # (a cold start not known: never guess)
        return n * cold, f" ({n:g}x its model's expected cold start, {fmt_s(cold)})"

    def _hedged(self, decision: Decision, now: float, state: GuardState) -> bool:
        """The pod was counted when it was hedged, within the window: not counted again."""
        if not decision.uid:
            return False
        at = state.of(self.name, BlastRadiusState).hedged.get(decision.uid)
        return at is not None and now - at < self.config.window_s

    def _recent(self, state: GuardState, now: float) -> tuple[Deletion, ...]:
        deletions = state.of(self.name, BlastRadiusState).deletions
        return tuple(d for d in deletions if now - d[1] < self.config.window_s)
