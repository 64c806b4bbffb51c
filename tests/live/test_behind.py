"""A decision made while the watch is behind waits until the watch has caught up (issue 18),
on the real control plane: serve reaches the API server through a TCP relay (tests/live/
faults.py), which is paused while pods finish their engine init and a hung one's budget
lapses. Nothing errors: the streams just fall silent, as in a partition.

serve's probe (a quorum list of one item, every 5 s) gets no answer, so the Pod watch is
behind: pod deletions are held (guard `watch_current`), the gauge and a log line say so, and
/readyz fails after the bound. When the relay flows again the watch relists, has caught up,
and decides again on the fresh picture: the hung pod is deleted, the pods that became Ready
in the gap never get a decision at all (not even one the look-again would spare)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.live.faults import Relay
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import params, workflows_of
from tests.live.test_skew_and_pause import (
    DELETE,
    HEALTHY,
    HUNG,
    SKEW_POLICY,
    all_ready,
    on,
    relayed,
    uids,
)
from tests.standins.argo_server import ArgoStandin

__all__ = ["relayed"]  # the fixture, shared with the skew and pause test

# Budgets long enough that the probe finds the gap (within about 10 s) before they lapse.
POLICY = SKEW_POLICY.replace("engine_init: 10", "engine_init: 30")
GAP_S = 45.0  # past every budget of the pods in engine init when the relay stopped
# Names of this test's own (test_skew_and_pause has a `gap` and a `hung-gap`).
OK, HUNG_ONE = "behind-ok", "behind-hung"


def readyz(s: Serve) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{s.port}/readyz", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def held(s: Serve) -> set[str]:
    return {
        str(x.get("pod"))
        for x in s.log_lines()
        if x.get("msg") == "suppressed" and x.get("guardrail") == "watch_current"
    }


def in_engine_init_for_serve(s: Serve) -> set[str]:
    """This test's pods that serve has in engine init (its /timelines): other tests' pods
    share the namespace."""
    url = f"http://127.0.0.1:{s.port}/timelines?namespace={NS}&state=engine_init"
    with urllib.request.urlopen(url, timeout=10) as r:
        docs = [json.loads(line) for line in r.read().splitlines() if line.strip()]
    return {str(d["pod"]) for d in docs if str(d["pod"]).startswith((f"{OK}-", f"{HUNG_ONE}-"))}


def both_in_engine_init(s: Serve) -> bool:
    """The hung pod and at least one healthy one, in serve's picture."""
    now = in_engine_init_for_serve(s)
    return len(now) >= 2 and any(p.startswith(f"{HUNG_ONE}-") for p in now)


def said(s: Serve, msg: str) -> list[dict[str, Any]]:
    return [x for x in s.log_lines() if x.get("msg") == msg]


def test_a_watch_gap_holds_pod_deletions_until_the_watch_has_caught_up(
    cluster: LiveCluster,
    relayed: tuple[Relay, Path],
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    assert "engine_init: 30" in POLICY
    relay, kubeconfig = relayed
    s = serve(policy=POLICY, kubeconfig=kubeconfig, env={"REMEDIATOR_BEHIND_UNREADY": "3"})
    wait_for(lambda: readyz(s)[0] == 200, 60, "serve ready")
    workloads(on(example_deployment(OK, 3, shape=HEALTHY, gpus=1), "kwok"))
    workloads(on(example_deployment(HUNG_ONE, 1, shape=HUNG, gpus=1), "kwok"))
    wait_for(lambda: both_in_engine_init(s), 60, "this test's pods in engine init")
    hung = next(iter(wait_for(lambda: uids(cluster, HUNG_ONE), 30, "the hung pod")))
    relay.pause()
    t0 = time.monotonic()
    try:
        healthy = wait_for(lambda: all_ready(cluster, OK, 3), 60, "Ready during the gap")
        wait_for(lambda: s.sample("remediator_behind") == 1, 30, "serve knows it is behind")
        status, why = wait_for(
            lambda: (r := readyz(s))[0] == 503 and r, 30, "/readyz failing while held"
        )
        assert "pod deletions held" in why, why
        assert s.sample("remediator_watch_behind", kind="Pod", namespace=NS) == 1
        # serve's picture is the one from before the gap: this test's pods it still has in
        # engine init (on a slow machine a healthy one may have become Ready before the
        # relay stopped: then it is Ready in serve's picture too, and nothing is held for it).
        stale = in_engine_init_for_serve(s)
        assert len(stale) >= 2, f"the hung pod and a healthy one in engine init: {stale}"
        # Every budget lapses in the gap, on the old picture: held, nothing decided.
        wait_for(lambda: held(s) >= stale, GAP_S, f"the {len(stale)} deletions held")
        time.sleep(max(GAP_S - (time.monotonic() - t0), 0))
        assert workflows_of(argo, DELETE) == []
        assert not said(s, "decision")
    finally:
        relay.resume()

    def found() -> set[str] | None:
        targets = {params(w)["uid"] for w in workflows_of(argo, DELETE)}
        return targets if hung in targets else None

    wait_for(found, 120, "the hung pod's deletion, once caught up")
    time.sleep(5)  # anything else serve would submit
    targets = {params(w)["uid"] for w in workflows_of(argo, DELETE)}
    assert targets == {hung}, (targets, healthy)
    decided = {str(x.get("pod")) for x in said(s, "decision")}
    assert len(decided) == 1 and decided <= held(s), decided
    assert said(s, "behind: pod deletions held until the watch has caught up")
    assert said(s, "caught up: held pod deletions are decided again")
    spared = [x for x in s.log_lines() if str(x.get("msg")).startswith("spared")]
    assert not spared, "never decided on the old picture, so nothing to spare"
    wait_for(lambda: readyz(s)[0] == 200, 30, "ready again")
