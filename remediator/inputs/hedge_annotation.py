"""The hedge step's annotation on a Deployment while it hedges a stalled pod: one format,
written by the step (steps/hedge.py) and read off the watch (inputs/workloads.py), so the core
knows which pod a running hedge races and which pods are new since its surge."""

from __future__ import annotations

import json
from dataclasses import dataclass

HEDGE = "remediator.io/hedge"  # on the Deployment while a hedge runs: what it is
HEDGED = "remediator.io/hedged"  # the uid of the pod last hedged: a rerun finds it done


@dataclass(frozen=True, slots=True)
class Hedge:
    """What the annotation says: the stalled pod, the count to return to, the pods from
    before the surge (uids), the deadline (seconds since the epoch, the step's own clock),
    and the new pod racing the stalled one: scheduled, not going (the step keeps it current;
    None while every new pod waits for a node). While one races, a core with
    `stuck_pod.hedge.leave_to_race` leaves the stalled pod to the hedge
    (policy.hedge.left_to_hedge)."""

    pod: str
    uid: str
    replicas: int
    before: tuple[str, ...]
    deadline: float
    racing: str | None = None

    def to_json(self) -> str:
        doc = {"pod": self.pod, "uid": self.uid, "replicas": self.replicas,
               "before": list(self.before), "deadline": self.deadline,
               "racing": self.racing}  # fmt: skip
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Hedge:
        """Raises ValueError for anything the step did not write."""
        try:
            doc = json.loads(text)
            return cls(
                str(doc["pod"]),
                str(doc["uid"]),
                int(doc["replicas"]),
                tuple(str(u) for u in doc["before"]),
                float(doc["deadline"]),
                None if doc.get("racing") is None else str(doc["racing"]),
            )
        except (ValueError, TypeError, KeyError) as e:
            raise ValueError(f"annotation {HEDGE} is not a hedge the step wrote: {e}") from e
