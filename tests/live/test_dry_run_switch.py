"""Switching the dry run off acts (issue 18), on the real control plane: `serve --dry-run`
announces "would delete-pod X" for a pod hung in engine init and is stopped; serve restarted
acting on the same state file deletes X (its workflow run, step and all, against the real
API server), exactly once. Before, the acting serve took the dry run's "would" as done and
held X as a repeat for a day: the pod it announced was never acted on."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.live.harness import LiveCluster, Serve, example_deployment, wait_for
from tests.live.test_incidents import params, run_workflow, workflows_of
from tests.live.test_skew_and_pause import DELETE, HUNG, SKEW_POLICY, on, uids
from tests.standins.argo_server import ArgoStandin


def said(s: Serve, msg: str, guardrail: str | None = None) -> list[dict[str, Any]]:
    return [
        x
        for x in s.log_lines()
        if x.get("msg") == msg and (guardrail is None or x.get("guardrail") == guardrail)
    ]


def test_a_pod_the_dry_run_announced_is_deleted_once_when_the_dry_run_is_switched_off(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    dry = serve(policy=SKEW_POLICY, env={"REMEDIATOR_DRY_RUN": "true"})
    workloads(on(example_deployment("switch", 1, shape=HUNG, gpus=1), "kwok"))
    x = next(iter(wait_for(lambda: uids(cluster, "switch"), 60, "the hung pod")))
    would = wait_for(lambda: said(dry, "suppressed", "dry_run"), 90, "the dry run's would")
    assert {w["uid"] for w in would} == {x}
    time.sleep(3)  # its row and guard state are written with the decision
    dry.stop()
    assert workflows_of(argo, DELETE) == []  # a dry run submits nothing

    acting = serve(policy=SKEW_POLICY)  # the same identity: the same state file
    assert acting.workdir == dry.workdir

    def deletes_of_x() -> list[dict[str, Any]]:
        return [w for w in workflows_of(argo, DELETE) if params(w)["uid"] == x]

    (wf,) = wait_for(deletes_of_x, 90, "the acting serve's delete of X")
    run_workflow(cluster, wf)
    wait_for(lambda: x not in uids(cluster, "switch"), 60, "X deleted")
    time.sleep(10)  # anything else serve would submit for X
    assert len(deletes_of_x()) == 1
    held = [s for s in said(acting, "suppressed") if s["uid"] == x]
    assert not [s for s in held if s["guardrail"] in ("idempotency", "dedup")], held
