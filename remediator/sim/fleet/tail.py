"""The slowest replicas of a simulated run, and what made each slow (`remediator simulate
--tail N`).

A P99 says how slow the tail is, not why. Each replica of the tail is told pod by pod, in
seconds from when the replica was requested: when each pod was scheduled, pulled its image,
started its container and had its log read; where the simulator hung it (its ground truth:
which step, from when); what the core decided about it and when the simulation carried that
out; what a guardrail held, or why no hedge was decided; and how the pod ended. What a policy
could change (a hang found late, a hedge held by its budget, a log read late because the
follower was full) and what it could not (a replacement's own cold start) can then be read off.

`TailWatch` is a Simulation observer (it keeps every pod and each decision carried out); the
held and ignored notes come from the core's sink (`CorePolicy.keep_notes`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from remediator.contract.decision import Decision
from remediator.sim.fleet import steps
from remediator.sim.fleet.cluster import Pod, Slot
from remediator.sim.fleet.controllers import Note
from remediator.sim.fleet.kube import BASE_TIME

_HUNG_IN = {"nccl_init": "NCCL init", "torch_compile": "torch.compile",
            "cuda_graphs": "CUDA graph capture"}  # fmt: skip
_WHY_CHARS = 160  # a decision's reason, cut: the replica's story stays readable
_PODS_SHOWN = 6  # pods told per replica in text (all of them in JSON)
# A hung pod whose log was first read this long after its container started was judged late:
# its hang went unseen meanwhile (the log follower's pods were all taken).
LATE_READ_S = 30.0


@dataclass(frozen=True, slots=True)
class PodStory:
    """One pod of a replica; times in seconds from the replica's request."""

    name: str
    hedge: bool  # started beside a stalled pod
    created: float
    scheduled: float | None
    pulled_s: float | None  # how long its image pull took (None: the node had it)
    started: float | None  # its container
    log_read: float | None  # its log first read by the core's follower
    hung: str | None  # where the simulator hung it: "NCCL init at +209s", "driver at +96s"
    ready: float | None
    ended: float | None  # deleted
    removed_by: str | None  # remediation | scale | rollout | hedge
    said: tuple[tuple[float, str], ...]  # what the core decided, held or let be, in time order


@dataclass(frozen=True, slots=True)
class ReplicaStory:
    seed: int
    deployment: str
    requested: float  # seconds into the run
    ready_s: float  # to Ready; never Ready (`censored`): to when it was scaled away, or the end
    censored: bool
    scaled_away: bool  # never Ready, and no longer wanted (scaled down, rolled over)
    pods: tuple[PodStory, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed, "deployment": self.deployment, "requested": self.requested,
            "ready_s": self.ready_s, "censored": self.censored, "scaled_away": self.scaled_away,
            "causes": causes(self),
            "pods": [{**{k: getattr(p, k) for k in PodStory.__slots__ if k != "said"},
                      "said": [list(s) for s in p.said]} for p in self.pods],
        }  # fmt: skip


class TailWatch:
    """Keeps every pod the simulation makes and each decision it carries out (a Simulation
    `observer`)."""

    def __init__(self) -> None:
        self.pods: list[Pod] = []
        self.decided: dict[str, list[tuple[float, str]]] = {}
        self.unserved: dict[int, float] = {}  # replicas scaled or rolled away before Ready

    def __call__(self, what: str, now: float, obj: object) -> None:
        if what == "created" and isinstance(obj, Pod):
            self.pods.append(obj)
        elif what == "unserved" and isinstance(obj, Slot):
            self.unserved[id(obj)] = now
        elif what == "decision" and isinstance(obj, Decision):
            said = f"{obj.action} decided: {_cut(obj.reason)}"
            self.decided.setdefault(obj.target, []).append((now, said))
        elif what == "hedge refused" and isinstance(obj, tuple):
            pod, why = obj  # the step's
            self.decided.setdefault(pod.name, []).append((now, f"the hedge's step refused: {why}"))

    def slowest(
        self, seed: int, n: int, end: float, notes: Iterable[Note] = ()
    ) -> list[ReplicaStory]:
        """The `n` replicas slowest to Ready (never Ready: counted to `end`), slowest first."""
        if n <= 0:
            return []
        by_slot: dict[int, list[Pod]] = {}
        for pod in self.pods:  # (every replica counts, as the run's P99 counts it)
            by_slot.setdefault(id(pod.slot), []).append(pod)
        ranked = sorted(by_slot.values(), key=lambda ps: -self._ready_s(ps, end))[:n]
        told = _notes_by_pod(notes, {p.name for ps in ranked for p in ps})
        return [self._story(seed, ps, end, told) for ps in ranked]

    def _ready_s(self, pods: list[Pod], end: float) -> float:
        """As the run counts it: to the first Ready; never Ready, to when the replica was
        scaled or rolled away, else to the run's end."""
        ready = [p.ready for p in pods if p.ready is not None]
        slot = pods[0].slot
        return (min(ready) if ready else self.unserved.get(id(slot), end)) - slot.requested

    def _story(
        self, seed: int, pods: list[Pod], end: float, told: dict[str, list[tuple[float, str]]]
    ) -> ReplicaStory:
        slot = pods[0].slot
        t0 = slot.requested
        ready = [p.ready for p in pods if p.ready is not None]
        stories = tuple(
            _pod(
                p,
                t0,
                sorted(
                    told.get(p.name, []) + self.decided.get(p.name, []), key=lambda said: said[0]
                ),
            )  # fmt: skip
            for p in sorted(pods, key=lambda p: p.created)
        )
        gone = id(slot) in self.unserved and not ready
        return ReplicaStory(seed, slot.deployment, t0, self._ready_s(pods, end), not ready, gone,
                            stories)  # fmt: skip


def _notes_by_pod(notes: Iterable[Note], pods: set[str]) -> dict[str, list[tuple[float, str]]]:
    """The core's held and ignored notes of these pods, at virtual times."""
    out: dict[str, list[tuple[float, str]]] = {}
    for note in notes:
        if note.pod in pods:
            what = f"held {note.action} by {note.guardrail}: " if note.kind == "held" else ""
            out.setdefault(note.pod, []).append((note.at - BASE_TIME, what + _cut(note.why)))
    return out


def _pod(p: Pod, t0: float, said: list[tuple[float, str]]) -> PodStory:
    def rel(t: float | None) -> float | None:
        return None if t is None else t - t0

    pulled = p.pulled - p.pull_start if p.pulled is not None and p.pull_start is not None else None
    return PodStory(
        name=p.name,
        hedge=p.hedge,
        created=p.created - t0,
        scheduled=rel(p.scheduled),
        pulled_s=pulled,
        started=rel(p.started),
        log_read=rel(p.followed_at),
        hung=_hung(p, t0),
        ready=rel(p.ready),
        ended=rel(p.deleted),
        removed_by=p.removed_by,
        said=tuple((at - t0, what) for at, what in said),
    )


def _hung(p: Pod, t0: float) -> str | None:
    if p.hang_at is None:
        return None
    if p.started is None:
        return f"the GPU driver (no container) from +{p.hang_at - t0:.0f}s"
    step = steps.hung_in(len(p.lines))
    where = _HUNG_IN.get(step or "", step or "engine init")
    return f"{where} from +{p.hang_at - t0:.0f}s"


def _cut(text: str) -> str:
    return text if len(text) <= _WHY_CHARS else text[: _WHY_CHARS - 1] + "…"


def causes(r: ReplicaStory) -> list[str]:
    """What made the replica slow that the story shows, worst known first: what the
    simulator did to it (hung, twice; a replacement that pulled its image) and what held
    its remediation back (its log read late, its hedge held or not decided, its deletion
    held)."""
    hung = [p for p in r.pods if p.hung is not None]
    said = [what for p in r.pods for _, what in p.said]
    out = []
    if len(hung) > 1:
        out.append("hung again")
    elif hung:
        out.append("hung")
    reads = [(p.started, p.log_read) for p in hung if p.started is not None]
    if any(read is None for _, read in reads):
        out.append("log never read")
    if any(read is not None and read - start > LATE_READ_S for start, read in reads):
        out.append("log read late")
    out.extend(f"hedge held by {g}" for g in _held_by(said, "hedge-pod"))
    out.extend(f"deletion held by {g}" for g in _held_by(said, "delete-pod"))
    if any(w.startswith("no hedge:") and "rolling out" in w for w in said):
        out.append("no hedge mid-rollout")
    if any(p.pulled_s is not None for p in r.pods[1:]):
        out.append("replacement pulled its image")
    if r.censored:
        out.append("never Ready")
    return out


def _held_by(said: list[str], action: str) -> list[str]:
    """The guardrails that held the replica's `action` (a deletion held by the blast radius
    or the rate limit is as much its wait as a hedge held)."""
    prefix = f"held {action} by "
    return sorted({w.split(":", 1)[0].removeprefix(prefix) for w in said if w.startswith(prefix)})


def render(policy: str, stories: list[ReplicaStory], replicas: int, p99: float) -> str:
    """The stories as text, slowest first, after what made them slow, counted."""
    head = f"{policy}: the {len(stories)} slowest of {replicas} replicas (P99 {p99:.0f}s)"
    counted = Counter(c for r in stories for c in causes(r))
    lines = [head]
    if counted:
        lines.append("  why: " + ", ".join(f"{c} {n}" for c, n in counted.most_common()))
    for r in stories:
        never = ""
        if r.censored:
            never = " (never Ready: to when it was scaled away)" if r.scaled_away else (
                " (never Ready: to the run's end)")  # fmt: skip
        why = "; ".join(causes(r))
        lines.append(f"  {r.ready_s:.0f}s{never}  {r.deployment}, seed {r.seed}, requested "
                     f"at {r.requested:.0f}s{f' ({why})' if why else ''}")  # fmt: skip
        told = list(enumerate(r.pods, 1))
        skipped = len(told) - _PODS_SHOWN
        if skipped > 0:  # a kill loop: its first pods and its last
            told = [*told[: _PODS_SHOWN - 2], *told[-2:]]
        for i, p in told:
            if skipped > 0 and i == len(r.pods) - 1:
                lines.append(f"    ... {skipped} pods more ...")
            lines.extend(_pod_lines(i, p))
    return "\n".join(lines)


def _pod_lines(i: int, p: PodStory) -> list[str]:
    label = f"pod {i}{' (hedge)' if p.hedge else ''}"
    facts = [f"created +{p.created:.0f}s"]
    for what, at in (("scheduled", p.scheduled), ("container", p.started),
                     ("log read", p.log_read), ("Ready", p.ready)):  # fmt: skip
        if at is not None:
            facts.append(f"{what} +{at:.0f}s")
    if p.pulled_s is not None:
        facts.insert(2, f"image pulled in {p.pulled_s:.0f}s")
    lines = [f"    {label}: " + ", ".join(facts)]
    pad = " " * 6
    if p.hung is not None:
        lines.append(f"{pad}hung in {p.hung}")
    lines.extend(f"{pad}+{at:.0f}s {what}" for at, what in p.said)
    if p.ended is not None:
        lines.append(f"{pad}+{p.ended:.0f}s deleted ({p.removed_by or 'gone'})")
    return lines
