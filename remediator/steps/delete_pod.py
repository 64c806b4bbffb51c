"""Delete one pod instance, never its replacement, and never one that has got going.

Look again first: the step runs a while after the decision (an outbox, a workflow queue, a
serve paused or cut off from its watch), so it reads the pod from the API server (a quorum
read: a GET without resourceVersion) and asks the core whether it is still stuck
(`policy.stuck.still_stuck`): a pod that became Ready, left the phase it was found stuck
in, or is another instance now is spared. The delete then carries the UID *and* the
resourceVersion it looked at as preconditions, so a pod that changed between the look and
the delete is refused by the API server itself (409) and looked at again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.inputs.pods import pod_seen
from remediator.inputs.records import InputError, PodSeen
from remediator.inputs.schema import Pod
from remediator.policy.stuck import still_stuck
from remediator.steps.kube import REQUEST_TIMEOUT, TRANSPORT_ERRORS, api_failure, status_body

Outcome = Literal["deleted", "would_delete", "already_gone", "replaced", "spared"]
_META_UID = re.compile(r"UID in object meta: ([0-9a-fA-F-]+)")
_LOOKS = 3  # a pod that changes under every look is not one to delete now


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
    phase: str | None = None,
) -> Deleted:
    for _ in range(_LOOKS):
        fresh = look(core, namespace, pod)
        if fresh is None:
            return Deleted("already_gone", False, f"pod {namespace}/{pod} no longer exists")
        if fresh.uid != uid:
            detail = (
                f"pod {namespace}/{pod} is a different instance now (uid {fresh.uid}); left alone"
            )
            return Deleted("replaced", False, detail, current_uid=fresh.uid)
        spared = still_stuck(fresh, uid, phase)
        if spared is not None:
            return Deleted("spared", False, f"spared: {spared} since the decision; left alone")
        done = _delete(core, namespace, pod, uid, str(fresh.version), grace_period_s, dry_run)
        if done is not None:
            return done
    return Deleted("spared", False, f"spared: pod {namespace}/{pod} kept changing as we looked")


def look(core: client.CoreV1Api, namespace: str, pod: str) -> PodSeen | None:
    """The pod as the API server has it now (a quorum read); None when it is gone."""
    try:
        response: Any = core.read_namespaced_pod(  # the raw response: decoded by our schema
            pod, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        raw = response.data
    except ApiException as e:
        if e.status == 404:
            return None
        raise api_failure(e, f"read pod {namespace}/{pod}") from e
    except TRANSPORT_ERRORS as e:
        raise api_failure(e, f"read pod {namespace}/{pod}") from e
    try:
        return pod_seen("MODIFIED", msgspec.json.decode(raw, type=Pod))
    except (msgspec.DecodeError, msgspec.ValidationError, InputError) as e:
        raise api_failure(e, f"read pod {namespace}/{pod}: not a Pod") from e


def _delete(
    core: client.CoreV1Api,
    namespace: str,
    pod: str,
    uid: str,
    version: str,
    grace_period_s: int | None,
    dry_run: bool,
) -> Deleted | None:
    """None: the pod changed since the look (the resourceVersion precondition): look again."""
    pre = client.V1Preconditions(uid=uid, resource_version=version if version != "0" else None)
    body = client.V1DeleteOptions(preconditions=pre, grace_period_seconds=grace_period_s)
    try:
        core.delete_namespaced_pod(
            pod,
            namespace,
            body=body,
            dry_run="All" if dry_run else None,
            _preload_content=False,  # what it answers (the pod, being deleted) is not used
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as e:
        return _refused(e, namespace, pod, uid)
    except TRANSPORT_ERRORS as e:
        raise api_failure(e, f"delete pod {namespace}/{pod}") from e
    if dry_run:
        return Deleted("would_delete", False, "server-side dry run: the delete would succeed")
    return Deleted("deleted", True, f"pod {namespace}/{pod} uid {uid} deleted")


def _refused(e: ApiException, namespace: str, pod: str, uid: str) -> Deleted | None:
    message = str(status_body(e).get("message", ""))
    if e.status == 404:
        return Deleted("already_gone", False, f"pod {namespace}/{pod} no longer exists")
    if e.status == 409:
        if "ResourceVersion in precondition" in message:
            return None
        found = _META_UID.search(message)
        return Deleted(
            "replaced",
            False,
            f"pod {namespace}/{pod} is a different instance now (precondition uid {uid} "
            f"failed); left alone. API said: {message}",
            current_uid=found.group(1) if found else None,
        )
    raise api_failure(e, f"delete pod {namespace}/{pod}") from e
