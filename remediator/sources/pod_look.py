"""Look at a pod again, from the API server, just before it is deleted.

The decision was made on the watch's picture, some time ago (a budget's timer, then an
outbox row): serve may have been paused, its watch cut off or behind. So the worker reads
the pod once more, with a quorum read (a GET without resourceVersion: etcd's current
state, never the watch cache), and the core judges the fresh object
(`policy.stuck.still_stuck`). The read runs in a thread: the client is synchronous.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.contract.decision import Decision
from remediator.inputs.pods import pod_seen
from remediator.inputs.schema import Pod
from remediator.policy.stuck import still_stuck

TIMEOUT = (5.0, 10.0)  # (connect, read) seconds: a look that hangs is a look that failed


class PodLook:
    def __init__(self, api: client.ApiClient, engines: tuple[str, ...] = ()) -> None:
        self._core = client.CoreV1Api(api)
        self._engines = engines

    async def __call__(self, decision: Decision) -> str | None:
        """Why the pod is spared (the same instance, no longer stuck), or None: still stuck,
        gone or another instance. Gone and replaced are not spared here: a leader killed
        between its submit and its record may have deleted the pod itself, so the submit goes
        on (Argo answers 409 for the workflow already there, and it is followed to its end);
        a new workflow's step finds the pod gone or replaced and deletes nothing. Raises when
        the API server cannot be asked: the caller waits and looks again."""
        return await asyncio.to_thread(self._look, decision)

    def _look(self, d: Decision) -> str | None:
        try:
            response: Any = self._core.read_namespaced_pod(
                d.target, d.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as e:
            if e.status == 404:
                return None  # gone: perhaps by our own earlier submit (see above)
            raise
        fresh = pod_seen("MODIFIED", msgspec.json.decode(response.data, type=Pod))
        if d.uid and fresh.uid != d.uid:
            return None  # another instance: the step's UID check spares it
        return still_stuck(fresh, d.uid or "", d.phase, self._engines)
