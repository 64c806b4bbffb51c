"""Mark a node unschedulable, as `kubectl cordon` does. Running pods stay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.steps.errors import StepError
from remediator.steps.kube import API_ERRORS, REQUEST_TIMEOUT, TRANSPORT_ERRORS, api_failure
from remediator.steps.report import ExitCode

Outcome = Literal["cordoned", "would_cordon", "already_cordoned"]


@dataclass(frozen=True, slots=True)
class Cordoned:
    outcome: Outcome
    action_taken: bool
    detail: str


def cordon(core: client.CoreV1Api, node: str, dry_run: bool) -> Cordoned:
    try:
        current = core.read_node(node, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        if e.status == 404:
            raise StepError(ExitCode.PRECONDITION, "not_found", f"node {node} not found") from e
        raise api_failure(e, f"read node {node}") from e
    except TRANSPORT_ERRORS as e:
        raise api_failure(e, f"read node {node}") from e
    if current.spec is not None and current.spec.unschedulable:
        return Cordoned("already_cordoned", False, f"node {node} was already unschedulable")
    try:
        core.patch_node(
            node,
            {"spec": {"unschedulable": True}},
            dry_run="All" if dry_run else None,
            _request_timeout=REQUEST_TIMEOUT,
        )
    except API_ERRORS as e:
        raise api_failure(e, f"patch node {node}") from e
    if dry_run:
        return Cordoned("would_cordon", False, "server-side dry run: the cordon would succeed")
    return Cordoned("cordoned", True, f"node {node} marked unschedulable")
