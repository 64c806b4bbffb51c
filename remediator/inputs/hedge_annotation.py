"""The hedge step's annotations on a Deployment while it hedges stalled pods: one format,
written by the step (steps/hedge.py) and read off the watch (inputs/workloads.py), so the core
knows which pod each running hedge races and which pods are new since its surge.

`remediator.io/hedge` is a JSON list, one entry per hedge running (a Deployment may hedge
several stalled pods at once, surged by one for each); a release before wrote one entry as a
bare object, read as a list of one. `remediator.io/hedged` lists, comma-separated, the last
`HEDGED_KEPT` pods whose hedge ended, newest last (a release before wrote one uid)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

HEDGE = "remediator.io/hedge"  # on the Deployment while a hedge runs: what it is
HEDGED = "remediator.io/hedged"  # the uids of the pods last hedged: a rerun finds it done
# A rerun of a step finds its hedge done among these: more than the hedges one Deployment runs
# at once (blast_radius holds hedges to half a workload's replicas, 20 pods, per window).
HEDGED_KEPT = 32


@dataclass(frozen=True, slots=True)
class Hedge:
    """One hedge the annotation says runs: the stalled pod, the count to return to (the
    Deployment's before any hedge running surged it: the same in every entry), the pods from
    before its surge (uids), the deadline (seconds since the epoch, the step's own clock),
    and the new pod racing the stalled one: scheduled, not going (the step keeps it current;
    None while every new pod waits for a node), with when it was scheduled (its PodScheduled
    condition as the API server has it, seconds since the epoch; None where it has none, or
    a release before wrote the entry): the hedge holds GPUs from then (guard.hedge_budget).
    While one races, a core with `stuck_pod.hedge.leave_to_race` leaves the stalled pod to
    the hedge (policy.hedge.left_to_hedge)."""

    pod: str
    uid: str
    replicas: int
    before: tuple[str, ...]
    deadline: float
    racing: str | None = None
    racing_since: float | None = None

    def to_json(self) -> str:
        doc = {"pod": self.pod, "uid": self.uid, "replicas": self.replicas,
               "before": list(self.before), "deadline": self.deadline,
               "racing": self.racing, "racing_since": self.racing_since}  # fmt: skip
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_doc(cls, doc: Any) -> Hedge:
        """One entry of the annotation. Raises ValueError for anything the step did not
        write."""
        try:
            return cls(
                str(doc["pod"]),
                str(doc["uid"]),
                int(doc["replicas"]),
                tuple(str(u) for u in doc["before"]),
                float(doc["deadline"]),
                None if doc.get("racing") is None else str(doc["racing"]),
                None if doc.get("racing_since") is None else float(doc["racing_since"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise ValueError(f"annotation {HEDGE} is not a hedge the step wrote: {e}") from e


def read_hedges(text: str) -> tuple[Hedge, ...]:
    """The hedges running, as the annotation says. Raises ValueError for anything the step
    did not write."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"annotation {HEDGE} is not JSON: {e}") from e
    items = doc if isinstance(doc, list) else [doc]  # (a bare object: a release before)
    hedges = tuple(Hedge.from_doc(item) for item in items)
    if len({h.uid for h in hedges}) != len(hedges):
        raise ValueError(f"annotation {HEDGE} names a pod twice")
    return hedges


def write_hedges(hedges: tuple[Hedge, ...]) -> str | None:
    """The annotation for these hedges (None: none runs, the annotation goes)."""
    if not hedges:
        return None
    return "[" + ",".join(h.to_json() for h in hedges) + "]"


def read_hedged(text: str | None) -> tuple[str, ...]:
    """The pods whose hedge ended, oldest first."""
    return tuple(u for u in (text or "").split(",") if u)


def write_hedged(text: str | None, uid: str) -> str:
    """`uid` added to the pods whose hedge ended, the oldest beyond `HEDGED_KEPT` dropped."""
    kept = [u for u in read_hedged(text) if u != uid]
    return ",".join([*kept, uid][-HEDGED_KEPT:])
