"""The API server's stamps on a real control plane (inputs.stamps): a graceful deletion
writes no managedFields entry, and the time it was asked for is read from the
deletionTimestamp it set (that moment plus the grace period). serve's clock moves on it, so
a pod deleted just after its budget lapsed is judged first (tests/runtime/test_cluster_time.py).
"""

from __future__ import annotations

import math
import time
import urllib.error
from collections.abc import Iterator

import pytest

from remediator.inputs.decode import normalize
from remediator.inputs.records import PodSeen
from remediator.inputs.stamps import api_server_time
from tests.live.harness import NS, LiveCluster

HOLD = "remediator.dev/test-hold"  # keeps the deleted pod readable until the test lets go
NAME = "stamp-probe"


@pytest.fixture
def held_pod(cluster: LiveCluster) -> Iterator[str]:
    """A pod bound to a node no kubelet runs (nothing acts on it: it stays as deleted, and
    its deletion is graceful, as a bound pod's is), held by a finalizer of the test's."""
    path = f"/api/v1/namespaces/{NS}/pods/{NAME}"
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": NAME, "namespace": NS, "finalizers": [HOLD]},
        "spec": {"nodeName": "no-kubelet-here", "containers": [{"name": "c", "image": "x:1"}]},
    }
    cluster.api("POST", f"/api/v1/namespaces/{NS}/pods", doc)
    try:
        yield path
    finally:
        cluster.api("PATCH", path, {"metadata": {"finalizers": None}},
                    ctype="application/merge-patch+json")  # fmt: skip
        try:
            cluster.api("DELETE", path, {"gracePeriodSeconds": 0})
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # gone once the finalizer was
                raise


def pod_seen(cluster: LiveCluster, path: str) -> PodSeen:
    items = normalize(cluster.api("GET", path))
    assert len(items) == 1 and isinstance(items[0], PodSeen), items
    return items[0]


def test_a_graceful_deletion_is_stamped_with_the_time_it_was_asked(
    cluster: LiveCluster, held_pod: str
) -> None:
    time.sleep(2.2)  # the pod's writes (whole seconds) are then at least two seconds old
    before = time.time()  # the API server runs on this machine's clock
    cluster.api("DELETE", held_pod, {"gracePeriodSeconds": 30})
    after = time.time()
    seen = pod_seen(cluster, held_pod)
    assert seen.deleting and seen.deletion_asked is not None, seen
    assert math.floor(before) <= seen.deletion_asked <= after, (before, seen, after)
    # No write stamped the deletion: without its request, the clock would stay seconds back.
    assert seen.written is not None and seen.written < math.floor(before), seen
    assert api_server_time(seen) == seen.deletion_asked
