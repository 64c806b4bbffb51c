"""The step commands against the real API server, as the workflow ServiceAccount with deploy/'s
RBAC: what is granted works, what an opt-in component grants is denied until it is applied."""

from __future__ import annotations

import json

from tests.deploy.support import load_docs
from tests.live.harness import REPO, LiveCluster, run_step, wait_for

CORDON_RBAC = REPO / "deploy" / "components" / "cordon-nodes" / "rbac.yaml"


def node_unschedulable(cluster: LiveCluster, name: str) -> bool:
    node = cluster.get(f"/api/v1/nodes/{name}")
    assert node is not None
    return bool(node["spec"].get("unschedulable"))


def test_cordon_is_denied_until_the_cordon_component_grants_it(cluster: LiveCluster) -> None:
    node = "gpu-node-003"
    denied = run_step(cluster, ["step", "cordon-node", "--node", node], {})
    assert denied.returncode != 0
    assert "forbidden" in (denied.stdout + denied.stderr).lower()
    assert not node_unschedulable(cluster, node)
    cluster.apply(load_docs(CORDON_RBAC))
    try:
        done = wait_for(
            lambda: (
                (r := run_step(cluster, ["step", "cordon-node", "--node", node], {}))
                and r.returncode == 0
                and r
            ),
            30,
            "cordon allowed once the ClusterRole is bound",
        )
        verdict = json.loads(done.stdout.strip().splitlines()[-1])
        assert verdict["outcome"] == "cordoned", verdict
        assert node_unschedulable(cluster, node)
        again = run_step(cluster, ["step", "cordon-node", "--node", node], {})
        assert json.loads(again.stdout.strip().splitlines()[-1])["outcome"] == "already_cordoned"
        missing = run_step(cluster, ["step", "cordon-node", "--node", "no-such-node"], {})
        assert missing.returncode == 3
    finally:
        patch = {"spec": {"unschedulable": None}}
        cluster.api(
            "PATCH", f"/api/v1/nodes/{node}", patch, ctype="application/strategic-merge-patch+json"
        )
        for doc in load_docs(CORDON_RBAC):
            kind = "clusterroles" if doc["kind"] == "ClusterRole" else "clusterrolebindings"
            cluster.delete(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{doc['metadata']['name']}")
