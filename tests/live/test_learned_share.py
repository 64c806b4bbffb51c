"""Two serves on the real control plane share what they learned through the real ConfigMap
(deploy/base/learned.yaml) with the real RBAC (get/patch on it by name): the leader writes its
learned history, and a replica that starts with an empty state file (an upgrade replaced both
pods and their emptyDirs) takes it on start instead of starting blind."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from remediator.runtime.learned_share import KEY, decode
from remediator.runtime.outbox import Outbox
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import ready

CONFIGMAP = "remediator-learned"
PATH = f"/api/v1/namespaces/remediator/configmaps/{CONFIGMAP}"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/remediator/leases/remediator-leader"
SHARING = {"REMEDIATOR_LEARNED_CONFIGMAP": CONFIGMAP, "REMEDIATOR_LEARNED_SHARE_INTERVAL": "0.5"}


def _clear(cluster: LiveCluster) -> None:
    cluster.kubectl("-n", "remediator", "patch", "configmap", CONFIGMAP, "--type=merge",
                    "-p", '{"data":null}')  # fmt: skip


@pytest.fixture
def shared(cluster: LiveCluster) -> Iterator[None]:
    """The session's one ConfigMap, empty before and after this test."""
    _clear(cluster)
    yield
    _clear(cluster)


def _shared(cluster: LiveCluster) -> list[tuple[str, str, float]]:
    data = (cluster.get(PATH) or {}).get("data") or {}
    samples, bad = decode(data[KEY]) if KEY in data else ([], [])
    assert bad == []
    return samples


def _said(s: Serve, msg: str) -> list[dict[str, Any]]:
    return [line for line in s.log_lines() if line.get("msg") == msg]


def test_a_replica_started_empty_takes_the_leaders_learned_history(
    cluster: LiveCluster,
    shared: None,
    serve: Callable[..., Serve],
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    a = serve("learned-a", env=SHARING)
    wait_for(lambda: (cluster.get(LEASE) or {}).get("spec", {}).get("holderIdentity")
             == "learned-a", 30, "a leads")  # fmt: skip
    sel = "app.kubernetes.io/name=vllm-learned"
    workloads(example_deployment("vllm-learned", 2, shape={"pull": "1s", "engine": "2s"}))
    wait_for(lambda: sum(map(ready, cluster.pods(NS, sel))) == 2, 60, "two pods Ready")
    wait_for(lambda: sum(1 for _, phase, _ in _shared(cluster) if phase == "total") == 2,
             30, "both cold starts in the shared history")  # fmt: skip
    a.stop()  # graceful: its last write, then it lets the Lease go
    own, bad = Outbox(str(a.workdir / "state.db"), lambda: 0.0).learned()
    assert bad == [] and own, "a kept its history in its own state file too"
    assert sorted(_shared(cluster)) == sorted(own)  # the shared copy is a's whole history

    b = serve("learned-b", env=SHARING)  # a new pod: a fresh state file
    (took,) = wait_for(lambda: _said(b, "learned history taken from the shared copy"), 30,
                       "b takes the shared history")  # fmt: skip
    assert took["samples"] == len(own)
    (restored,) = _said(b, "learned history restored")
    assert restored["samples"] == len(own) and restored["models"] == 1
    assert b.healthy()


def test_without_the_configmap_serve_starts_and_says_why(
    cluster: LiveCluster, shared: None, serve: Callable[..., Serve]
) -> None:
    """A name the RBAC does not grant (or a ConfigMap never created): a warning, and serve
    runs on with its own history; the history is a help, never a reason not to start."""
    s = serve("learned-c", env={**SHARING, "REMEDIATOR_LEARNED_CONFIGMAP": "not-granted"})
    (said,) = wait_for(lambda: _said(s, "shared learned history unreadable: left out"), 30,
                       "the warning")  # fmt: skip
    assert "ConfigMap remediator/not-granted: 403" in said["error"]
    assert s.healthy()
    assert json.dumps(cluster.get(PATH) or {}).count(KEY) == 0  # nothing written anywhere
