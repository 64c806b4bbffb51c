"""The core's public pieces: the decider and the guard, and their records.

    inputs + now ──▶ Decider ──Candidate──▶ Guard ──▶ Decision | Suppressed
                        ▲                     │
                        └───── Feedback ──────┘

`Session` (remediator.session) is the two wired together in one process; the Kafka
runtime runs them apart, over the records of `contract.records` and `contract.codec`.
"""

from remediator.contract.records import Candidate, Feedback, GotThrough, Learned, RetryAt
from remediator.core.decider import Decider, DeciderSink
from remediator.core.guard import ClusterHistory, Guard, Judged, Verdicts

__all__ = [
    "Candidate",
    "ClusterHistory",
    "Decider",
    "DeciderSink",
    "Feedback",
    "GotThrough",
    "Guard",
    "Judged",
    "Learned",
    "RetryAt",
    "Verdicts",
]
