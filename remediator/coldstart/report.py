"""What `kubectl coldstart` tells about the timelines: per workload, P50/P95 of each phase over
the pods that finished it; per pod not Ready yet, the phase it is in, for how long, and how
that compares with its siblings (the workload's other pods that went through that phase).

Pure: timelines and the cluster's `now` in, records out. Quantiles are nearest-rank (a value
some pod really took), as replay's summary and slo-report's per-pod figures are.
"""

from __future__ import annotations

from dataclasses import dataclass

from remediator.output import nearest_rank
from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES, UNFINISHED, PodTimeline

COLUMNS = (*PHASES, "total")


@dataclass(frozen=True, slots=True)
class Spread:
    """A phase's P50 and P95 over `pods` pods (None when no pod finished it)."""

    p50: float | None
    p95: float | None
    pods: int

    def to_json(self) -> dict[str, float | int | None]:
        return {"p50": self.p50, "p95": self.p95, "pods": self.pods}


def spread(values: list[float | None]) -> Spread:
    done = sorted(v for v in values if v is not None)
    if not done:
        return Spread(None, None, 0)
    return Spread(nearest_rank(done, 0.5), nearest_rank(done, 0.95), len(done))


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pod not Ready yet: where it is, since when, against its siblings."""

    pod: PodTimeline
    phase: str
    for_s: float | None  # None when the phase's start is not known
    siblings: Spread  # the phase, over the workload's other pods that finished it
    why: str  # what the cluster says it waits for ("" when it says nothing)

    @property
    def slower(self) -> bool:
        """Longer already than 95% of its siblings took for the whole phase."""
        p95 = self.siblings.p95
        return self.for_s is not None and p95 is not None and self.for_s > p95

    def sentence(self) -> str:
        """ "engine_init for 312s; siblings P50 240s, P95 300s (7 pods)"."""
        head = f"{self.phase} for {_s(self.for_s)}" if self.for_s is not None else self.phase
        s = self.siblings
        if s.pods and s.p50 is not None and s.p95 is not None:
            plural = "pod" if s.pods == 1 else "pods"
            head += f"; siblings P50 {_s(s.p50)}, P95 {_s(s.p95)} ({s.pods} {plural})"
        else:
            head += "; no sibling has finished it yet"
        if self.slower:
            head += ": longer than 95% of them"
        return head + (f"; {self.why}" if self.why else "")

    def to_json(self) -> dict[str, object]:
        t = self.pod
        return {
            "kind": "waiting",
            "namespace": t.namespace,
            "pod": t.name,
            "uid": t.uid,
            "phase": self.phase,
            "for_s": self.for_s,
            "siblings": self.siblings.to_json(),
            "slower_than_p95": self.slower,
            "why": self.why or None,
        }


@dataclass(frozen=True, slots=True)
class Workload:
    """The pods of one Deployment, StatefulSet (or other owner), or one bare pod."""

    name: str  # deploy/NAME, sts/NAME, Kind/NAME, pod/NAME
    namespace: str
    pods: tuple[PodTimeline, ...]

    def phases(self) -> dict[str, Spread]:
        out = {p: spread([t.phases()[p] for t in self.pods]) for p in PHASES}
        out["total"] = spread([t.total() for t in self.pods])
        return out

    def steps(self) -> dict[str, Spread]:
        """vLLM's engine-init steps, where logs were read (else empty)."""
        per = [t.engine_steps() for t in self.pods if t.engine is not None]
        found = {s: spread([p.get(s) for p in per]) for s in TIMELINE_STEPS}
        return {s: v for s, v in found.items() if v.pods}

    def states(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.pods:
            out[t.state()] = out.get(t.state(), 0) + 1
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "kind": "workload",
            "namespace": self.namespace,
            "workload": self.name,
            "pods": len(self.pods),
            "states": self.states(),
            "phases": {p: s.to_json() for p, s in self.phases().items()},
            "engine_init_steps": {p: s.to_json() for p, s in self.steps().items()},
        }


def workload_of(t: PodTimeline) -> str:
    """deploy/NAME for a ReplicaSet's pod (its pod-template-hash cut off), sts/NAME, else
    the owner as Kind/NAME, else pod/NAME."""
    owner = t.owner
    if not owner:
        return f"pod/{t.name}"
    kind, _, name = owner.partition("/")
    if kind == "ReplicaSet":
        h = (t.labels or {}).get("pod-template-hash")
        if h and name.endswith(f"-{h}"):
            return f"deploy/{name[: -len(h) - 1]}"
        return f"rs/{name}"
    if kind == "StatefulSet":
        return f"sts/{name}"
    if kind == "DaemonSet":
        return f"ds/{name}"
    return owner


def workloads(timelines: list[PodTimeline]) -> list[Workload]:
    groups: dict[tuple[str, str], list[PodTimeline]] = {}
    for t in timelines:
        groups.setdefault((t.namespace, workload_of(t)), []).append(t)
    return [Workload(name, ns, tuple(pods)) for (ns, name), pods in sorted(groups.items())]


def waiting(t: PodTimeline, siblings: Workload, now: float) -> Waiting | None:
    """None for a pod that is Ready (or has left its cold start)."""
    phase = t.state()
    if phase not in UNFINISHED:
        return None
    since = t.state_since()
    for_s = max(0.0, now - since) if since is not None else None
    others = [o.phases()[phase] for o in siblings.pods if o is not t]
    return Waiting(t, phase, for_s, spread(others), _why(t, phase))


def _why(t: PodTimeline, phase: str) -> str:
    """What the cluster says the pod waits for, most telling first."""
    said = []
    if phase == "scheduling" and t.unschedulable:
        said.append(f"scheduler: {t.unschedulable}")
    reason = t.waiting_reason
    if reason and reason not in ("ContainerCreating", "PodInitializing"):
        said.append(f"container waiting: {reason}")
    elif phase == "image_pull" and t.image_backoff():
        said.append("the image pull is backing off")  # (Events say so; the status not yet)
    if t.restarts:
        # (a crash loop's back-off is not always in `waiting_reason`: the object that shows it
        # carries no newer timestamp than the one that showed the container running)
        said.append(f"the engine restarted {t.restarts} time{'s' if t.restarts > 1 else ''}")
    step = t.engine_step()
    if step is not None:
        said.append(f"in vLLM step {step}")
    return "; ".join(said)


def _s(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
