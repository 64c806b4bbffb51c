"""A GPU driver hang on the real control plane: a pod whose container is never created (kwok
plays it: cold-start.remediator.dev/hang: start), beside siblings of its model whose
containers start in a second, is deleted once the container-start budget learned from them
(adaptive.lower) is spent, long before the static one; the decision says how it was set."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.live.harness import NS, LiveCluster, Serve, example_deployment, policy, wait_for
from tests.live.test_incidents import params, ready, workflows_of
from tests.live.test_progress import one_more_hung
from tests.standins.argo_server import ArgoStandin

STATIC_S = 60
POLICY = policy(
    drop=["image_update"],
    stuck_pod={
        "budgets": {"container_start": STATIC_S},
        "adaptive": {"enabled": True, "min_samples": 2, "lower": ["container_start"],
                     "lower_floor_s": 3},
    },
)  # fmt: skip
# A pull long enough to mark the third pod before its container would be created.
SHAPE = {"pull": "5s", "start": "1s", "engine": "2s"}
SEL = "app.kubernetes.io/name=vllm-driver"


def _pods(cluster: LiveCluster) -> list[dict[str, Any]]:
    return cluster.pods(NS, SEL)


def test_a_container_never_created_beside_fast_siblings_goes_on_the_learned_budget(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    serve(policy=POLICY)
    doc = workloads(example_deployment("vllm-driver", replicas=2, shape=SHAPE))
    wait_for(lambda: len(ps := _pods(cluster)) == 2 and all(map(ready, ps)), 60, "two Ready")

    hung = one_more_hung(cluster, doc, _pods(cluster), SEL, hang="start")
    name = hung["metadata"]["name"]

    wf = wait_for(lambda: workflows_of(argo, "delete-stuck-inference-pod"), 90, "a delete")[0]
    assert (params(wf)["pod"], params(wf)["uid"]) == (name, hung["metadata"]["uid"])
    reason = params(wf)["reason"]
    found = re.search(r"container_start for (\d+)s, over its (\d+)s budget \((the )?adaptive",
                      reason)  # fmt: skip
    assert found is not None, reason
    waited_s, budget_s = int(found[1]), int(found[2])
    assert 3 <= budget_s <= waited_s < STATIC_S, reason  # learned, at least the floor
    pod = cluster.get(f"/api/v1/namespaces/{NS}/pods/{name}") or {}
    statuses = pod.get("status", {}).get("containerStatuses", [{}])
    assert "containerID" not in statuses[0]  # its container was never created
    assert len(workflows_of(argo, "delete-stuck-inference-pod")) == 1  # no sibling touched
