"""Delete one pod instance, never its replacement: the UID is a precondition.

A pod recreated under the same name (a StatefulSet's, or one the controller
replaced) has a new UID; the API server answers 409 instead of deleting it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.steps.kube import REQUEST_TIMEOUT, TRANSPORT_ERRORS, api_failure, status_body

Outcome = Literal["deleted", "would_delete", "already_gone", "replaced"]
_META_UID = re.compile(r"UID in object meta: ([0-9a-fA-F-]+)")


@dataclass(frozen=True, slots=True)
class Deleted:
    outcome: Outcome
    action_taken: bool
    detail: str
    current_uid: str | None = None  # the replacement's UID, when there is one


def delete_pod(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    uid: str,
    grace_period_s: int | None,
    dry_run: bool,
) -> Deleted:
    body = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=uid), grace_period_seconds=grace_period_s
    )
    try:
        core.delete_namespaced_pod(
            pod,
            namespace,
            body=body,
            dry_run="All" if dry_run else None,
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as e:
        return _refused(e, namespace, pod, uid)
    except TRANSPORT_ERRORS as e:
        raise api_failure(e, f"delete pod {namespace}/{pod}") from e
    if dry_run:
        return Deleted("would_delete", False, "server-side dry run: the delete would succeed")
    return Deleted("deleted", True, f"pod {namespace}/{pod} uid {uid} deleted")


def _refused(e: ApiException, namespace: str, pod: str, uid: str) -> Deleted:
    message = str(status_body(e).get("message", ""))
    if e.status == 404:
        return Deleted("already_gone", False, f"pod {namespace}/{pod} no longer exists")
    if e.status == 409:
        found = _META_UID.search(message)
        return Deleted(
            "replaced",
            False,
            f"pod {namespace}/{pod} is a different instance now (precondition uid {uid} "
            f"failed); left alone. API said: {message}",
            current_uid=found.group(1) if found else None,
        )
    raise api_failure(e, f"delete pod {namespace}/{pod}") from e
