"""What the policy engine decides, and what a guardrail says when it says no.

These two records are the contract between the sans-I/O core and the executors:
the core emits them, the guard pipeline filters them, executors turn them into
Argo Workflows and Slack messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Action = Literal["delete-pod", "restart-warmup", "verify-gpu-memory", "notify", "cordon-node"]

# The WorkflowTemplate each acting decision is submitted from; "notify" runs no workflow.
TEMPLATE_FOR_ACTION: dict[str, str] = {
    "delete-pod": "delete-stuck-inference-pod",
    "restart-warmup": "restart-gpu-warmup",
    "verify-gpu-memory": "verify-gpu-memory-stability",
    "cordon-node": "cordon-gpu-node",
}


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

    def param(self, key: str) -> str | None:
        for k, v in self.params:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Suppressed:
    """A decision a guardrail stopped, with the guardrail's name and why."""

    decision: Decision
    guardrail: str
    reason: str
