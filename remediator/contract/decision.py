"""What the policy engine decides, and what a guardrail says when it says no.

These two records are the contract between the rules (`policy`), the guardrails
(`guard`) and the executors: the rules emit them, the guard pipeline filters them,
executors carry them out. Neither `policy` nor `guard` owns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# A row of `contract.actions.ACTIONS`; the Literal lets mypy check the rules' spelling.
Action = Literal[
    "delete-pod", "restart-warmup", "verify-gpu-memory", "notify", "cordon-node", "hedge-pod"
]


@dataclass(frozen=True, slots=True)
class Decision:
    """One thing the core wants done. `incident` is deterministic: the same cause
    always yields the same id, so a re-submit is recognisably a duplicate."""

    action: Action
    namespace: str
    target: str  # pod, daemonset or node name, by action
    reason: str
    incident: str
    at: float  # virtual-clock seconds since the epoch
    uid: str | None = None  # pod UID: the precondition that spares a replacement pod
    workload: str | None = None  # "namespace/Kind/name" of the owning workload
    params: tuple[tuple[str, str], ...] = field(default=())  # extra workflow parameters
    # Facts the guardrails weigh, filled by the policy engine from the timelines.
    pod_created_at: float | None = None  # the target pod's creationTimestamp
    expected_cold_start_s: float | None = None  # what a cold start of this model takes
    replicas: int | None = None  # desired replicas of `workload`, when known
    # The phase a stuck pod was found in: a look again before the delete spares it once it
    # has left that phase (policy.stuck.still_stuck).
    phase: str | None = None
    # Progress-aware detection's finding (policy.stall): the stretch of engine init the pod
    # stalled in, judged against its siblings' times there; min_age weighs it (its `stalled`).
    stalled: str | None = None
    # A hedge's cost (guard.hedge_budget): the GPUs the hedge pod holds. What pays for it
    # is in the guard state (clocked in from every decider's cold starts).
    gpus: int | None = None
    # The target pod's node, where a verification found its GPU memory unsettled (the
    # gpu_memory rule): the cause is known and the pod serves nothing, so blast_radius
    # does not cap its deletion (guard/blast_radius.py).
    unsettled_node: str | None = None
    # The incident whose Slack thread this decision is told in, not the channel (the
    # acting component replies under that incident's act message where it has one): each
    # deletion on an unsettled node goes into the thread of the node's own message.
    told_under: str | None = None
    # creationTimestamps of the workload's pods that became Ready lately (the latest few,
    # oldest first): blast_radius stops counting a deletion once a pod created after it is
    # Ready (its replica, or one like it, is served again).
    ready_created: tuple[float, ...] = ()

    @property
    def where(self) -> str:
        """The target as people read it: `namespace/name`, or the bare name of a node."""
        return f"{self.namespace}/{self.target}" if self.namespace else self.target

    def param(self, key: str) -> str | None:
        for k, v in self.params:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A decision a guardrail stopped, with the guardrail's name and why.

    `retry_at`: when asking again may get another answer (never earlier); None: the
    answer stays no for this decision (a duplicate, a dry run). The engine looks again
    no earlier than this, so it never needs to know a guardrail's arithmetic.
    `queued`: the guardrail kept the decision a place at `retry_at` (the rate limit's next
    free token): asked again then it goes, so the engine looks again exactly then, not a
    check interval later."""

    decision: Decision
    guardrail: str
    reason: str
    retry_at: float | None = None
    simulated: bool = False  # held by a stage that simulates (dry run): "would have"
    queued: bool = False
