"""The one table of actions: what each is, what it targets, which guardrails weigh it.

An action's row is all the core knows about it. How it is carried out belongs to an
executor (the Argo WorkflowTemplate and its parameters: `executors/argo_params.py`) and
how it is told to people to the notifier (`executors/slack.py`). Adding an action is one
row here, one mapping in an executor and one message; see docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Target = Literal["pod", "daemonset", "node"]


@dataclass(frozen=True, slots=True)
class ActionSpec:
    name: str
    target: Target | None  # what `Decision.target` names; None: a pod or a node, by decision
    acts: bool  # changes the cluster: the kill switch, dry run, caps and cooldown weigh it
    deletes_pods: bool  # min_age and blast_radius weigh it
    # A later one replaces an earlier (a warmup for the newest image): held as a repeat,
    # it is asked again when the hold ends, for the newest state, never dropped.
    supersedes: bool = False
    # Starts a pod beyond the workload's replica count (a hedge): blast_radius counts it
    # beside deletions, and hedge_budget charges its GPUs.
    starts_pods: bool = False


ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec("delete-pod", "pod", acts=True, deletes_pods=True),
        ActionSpec("restart-warmup", "daemonset", acts=True, deletes_pods=False, supersedes=True),
        ActionSpec("verify-gpu-memory", "node", acts=True, deletes_pods=False),
        ActionSpec("cordon-node", "node", acts=True, deletes_pods=False),
        ActionSpec("hedge-pod", "pod", acts=True, deletes_pods=False, starts_pods=True),
        ActionSpec("notify", None, acts=False, deletes_pods=False),
    )
}


# The table's columns as sets, for the guardrails' hot path (one membership test).
ACTING = frozenset(name for name, spec in ACTIONS.items() if spec.acts)
DELETING_PODS = frozenset(name for name, spec in ACTIONS.items() if spec.deletes_pods)
STARTING_PODS = frozenset(name for name, spec in ACTIONS.items() if spec.starts_pods)


class UnknownAction(ValueError):
    """A name that is no row of the table: our bug, never the cluster's input."""


def action(name: str) -> ActionSpec:
    found = ACTIONS.get(name)
    if found is None:
        raise UnknownAction(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    return found
