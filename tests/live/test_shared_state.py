"""Two serves on the real control plane share what they remember through the real ConfigMap
(deploy/base/state.yaml) with the real RBAC (get/patch on it by name): the leader writes its
learned history and its guard state, and a replica that starts with an empty state file (an
upgrade replaced both pods and their emptyDirs) takes them on start: it judges by the
siblings at once, and what the guardrails let through before is not let through again.
Argo is the suite's stand-in (it records submissions)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from remediator.runtime.outbox import Outbox
from remediator.runtime.shared_state import GUARD_KEY, KEY, THROUGH_KEY, decode
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import params, ready, workflows_of
from tests.standins.argo_server import ArgoStandin

DELETE = "delete-stuck-inference-pod"

CONFIGMAP = "remediator-state"
PATH = f"/api/v1/namespaces/remediator/configmaps/{CONFIGMAP}"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/remediator/leases/remediator-leader"
SHARING = {
    "REMEDIATOR_NO_SHARED_STATE": "false",  # the harness turns it off for every other test
    "REMEDIATOR_STATE_CONFIGMAP": CONFIGMAP,
    "REMEDIATOR_STATE_SHARE_INTERVAL": "0.5",
}


def _clear(cluster: LiveCluster) -> None:
    cluster.kubectl("-n", "remediator", "patch", "configmap", CONFIGMAP, "--type=merge",
                    "-p", '{"data":null}')  # fmt: skip


@pytest.fixture
def shared(cluster: LiveCluster) -> Iterator[None]:
    """The session's one ConfigMap, empty before and after this test."""
    _clear(cluster)
    yield
    _clear(cluster)


def _data(cluster: LiveCluster) -> dict[str, str]:
    return dict((cluster.get(PATH) or {}).get("data") or {})


def _shared(cluster: LiveCluster) -> list[tuple[str, str, float]]:
    data = _data(cluster)
    samples, bad = decode(data[KEY]) if KEY in data else ([], [])
    assert bad == []
    return samples


def _said(s: Serve, msg: str) -> list[dict[str, Any]]:
    return [line for line in s.log_lines() if line.get("msg") == msg]


def _leading(cluster: LiveCluster, serve: Callable[..., Serve], name: str) -> Serve:
    """A sharing serve, once it holds the Lease."""
    s = serve(name, env=SHARING)
    wait_for(lambda: (cluster.get(LEASE) or {}).get("spec", {}).get("holderIdentity") == name,
             30, f"{name} leads")  # fmt: skip
    return s


def test_a_replica_started_empty_takes_the_leaders_history_and_guard_state(
    cluster: LiveCluster,
    shared: None,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    a = _leading(cluster, serve, "shared-a")
    sel = "app.kubernetes.io/name=vllm-shared"
    workloads(example_deployment("vllm-shared", 2, shape={"pull": "1s", "engine": "2s"}))
    workloads(example_deployment("vllm-shared-hung", 1, shape={"pull": "1s", "hang": "engine"}))
    wait_for(lambda: sum(map(ready, cluster.pods(NS, sel))) == 2, 60, "two pods Ready")
    (hung,) = cluster.pods(NS, "app.kubernetes.io/name=vllm-shared-hung")
    uid = hung["metadata"]["uid"]

    def deletes() -> list[dict[str, Any]]:
        return [w for w in workflows_of(argo, DELETE) if params(w)["uid"] == uid]

    wait_for(deletes, 60, "a deletes the hung pod (the engine_init budget is 10 s)")
    wait_for(lambda: sum(1 for _, phase, _ in _shared(cluster) if phase == "total") >= 2
             and GUARD_KEY in _data(cluster), 30, "the history and guard state shared")  # fmt: skip
    a.stop()  # graceful: its last write, then it lets the Lease go
    own, bad = Outbox(str(a.workdir / "state.db"), lambda: 0.0).learned()
    assert bad == [] and own, "a kept its history in its own state file too"
    assert sorted(_shared(cluster)) == sorted(own)  # the shared copy is a's whole history
    guard = Outbox(str(a.workdir / "state.db"), lambda: 0.0).guard_state(acting=True)
    assert guard is not None and _data(cluster)[GUARD_KEY] == guard

    b = serve("shared-b", env=SHARING)  # a new pod: a fresh state file
    (took,) = wait_for(lambda: _said(b, "state taken from the shared copy"), 30,
                       "b takes the shared state")  # fmt: skip
    assert took["samples"] == len(own) and took["guard"] is True
    (restored,) = _said(b, "learned history restored")
    assert restored["samples"] == len(own) and restored["models"] == 1
    assert restored["workloads"] == 1  # vllm-shared's Ready pods (blast_radius heals by them)
    # b leads, sees the same hung pod and decides to delete it again: the guard state a let
    # it through with holds it, so Argo is asked once in all.
    held = wait_for(lambda: [x for x in _said(b, "suppressed") if x.get("uid") == uid], 60,
                    "b holds the deletion a already made")  # fmt: skip
    assert held[0]["action"] == "delete-pod"
    assert len(deletes()) == 1
    assert len([r for r in argo.submitted() if params_of(r) == uid]) == 1
    assert b.healthy()


def params_of(request: Any) -> str | None:
    """The uid parameter of a submission the stand-in recorded."""
    body = request.body.get("submitOptions") or {}
    for p in body.get("parameters") or []:
        name, _, value = str(p).partition("=")
        if name == "uid":
            return value
    return None


def test_without_the_configmap_serve_starts_and_says_why(
    cluster: LiveCluster, shared: None, serve: Callable[..., Serve]
) -> None:
    """A name the RBAC does not grant (or a ConfigMap never created): a warning, and serve
    runs on with its own history; the history is a help, never a reason not to start."""
    s = serve("shared-c", env={**SHARING, "REMEDIATOR_STATE_CONFIGMAP": "not-granted"})
    (said,) = wait_for(lambda: _said(s, "shared state unreadable: left out"), 30,
                       "the warning")  # fmt: skip
    assert "ConfigMap remediator/not-granted: 403" in said["error"]
    assert s.healthy()
    assert not _data(cluster)  # nothing written anywhere


def test_a_configmap_edited_into_nonsense_is_said_and_serve_starts_on_its_own(
    cluster: LiveCluster, shared: None, serve: Callable[..., Serve]
) -> None:
    """Whatever the ConfigMap holds (edited by hand, another version's): what does not read is
    a warning, and serve starts with its own (empty) history and guard state."""
    bad = {"data": {KEY: '{"learned": [["m", "total", [-1]]]}', GUARD_KEY: "{not json"}}
    cluster.kubectl("-n", "remediator", "patch", "configmap", CONFIGMAP, "--type=merge",
                    "-p", json.dumps(bad))  # fmt: skip
    off = serve("shared-off")  # the harness's REMEDIATOR_NO_SHARED_STATE=true: not read at all
    s = serve("shared-d", env=SHARING)
    (rows,) = wait_for(lambda: _said(s, "shared state unreadable: left out"), 30, "the rows")
    assert rows["error"].startswith("learned.json row 0: not a list of non-negative seconds")
    (guard,) = wait_for(lambda: _said(s, "shared guard state unreadable: left out"), 30,
                        "the guard state")  # fmt: skip
    assert guard["error"]
    assert not _said(s, "state taken from the shared copy")
    assert s.healthy()
    assert not [x for x in off.log_lines() if "shared" in str(x.get("msg"))]


def test_a_replica_started_empty_remembers_the_deletion_a_kill_loop_needs(
    cluster: LiveCluster,
    shared: None,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Every pod of the workload hangs in engine init and no pod of its model ever got
    through: a leads and deletes the first; then an upgrade (a stops, b starts with an empty
    state file), and the deletion is carried out (the pod deleted, as its workflow would).
    Its replacement is as slow. b remembers a's deletion (the shared copy's `through.json`):
    it holds the replacement and tells on-call the budget looks too tight, instead of
    deleting it in turn (a kill loop, slowed only by the cooldown)."""
    a = _leading(cluster, serve, "loop-a")
    sel = "app.kubernetes.io/name=vllm-loop"
    workloads(example_deployment("vllm-loop", 1, shape={"pull": "1s", "hang": "engine"}))
    (first,) = wait_for(lambda: cluster.pods(NS, sel) or None, 30, "the first pod")
    uid = first["metadata"]["uid"]
    wait_for(lambda: [w for w in workflows_of(argo, DELETE) if params(w)["uid"] == uid], 60,
             "a deletes the first pod (the engine_init budget is 10 s)")  # fmt: skip
    wait_for(lambda: uid in _data(cluster).get(THROUGH_KEY, ""), 30, "the deletion shared")
    a.stop()

    b = serve("loop-b", env=SHARING)
    (took,) = wait_for(lambda: _said(b, "state taken from the shared copy"), 30,
                       "b takes the shared state")  # fmt: skip
    assert took["through"] >= 1
    cluster.kubectl("-n", NS, "delete", "pod", first["metadata"]["name"], "--wait=false")
    (second,) = wait_for(lambda: [p for p in cluster.pods(NS, sel)
                                  if p["metadata"]["uid"] != uid] or None, 30,
                         "its replacement")  # fmt: skip
    again = second["metadata"]["uid"]
    (notice,) = wait_for(lambda: [x for x in _said(b, "decision") if x["action"] == "notify"
                                  and "was deleted for exceeding it" in x["reason"]], 60,
                         "b holds the replacement: the budget looks too tight")  # fmt: skip
    assert second["metadata"]["name"] in notice["reason"]
    time.sleep(3)  # a few more checks (1 s apart): still held, never deleted
    about = [x for x in [*_said(b, "decision"), *_said(b, "suppressed")] if x.get("uid") == again]
    assert not [x for x in about if x.get("action") == "delete-pod"], about
    assert not [w for w in workflows_of(argo, DELETE) if params(w)["uid"] == again]
    assert b.healthy()
