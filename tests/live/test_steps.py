"""The step commands against the real API server, as the workflow ServiceAccount with deploy/'s
RBAC: what is granted works, and what a component grants is denied without it."""

from __future__ import annotations

import json

from tests.deploy.support import load_docs
from tests.live.harness import REPO, LiveCluster, run_step, wait_for

CORDON_RBAC = REPO / "deploy" / "components" / "cordon-nodes" / "rbac.yaml"
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


def node_unschedulable(cluster: LiveCluster, name: str) -> bool:
    node = cluster.get(f"/api/v1/nodes/{name}")
    assert node is not None
    return bool(node["spec"].get("unschedulable"))


def test_cordon_is_denied_until_the_cordon_component_grants_it(cluster: LiveCluster) -> None:
    """The production overlay holds the cordon component (cordoning is on by default): its
    binding taken away, the step is refused; applied again, it cordons."""
    node = "gpu-node-003"
    binding = next(d for d in load_docs(CORDON_RBAC) if d["kind"] == "ClusterRoleBinding")
    cluster.delete(f"{BINDINGS}/{binding['metadata']['name']}")
    try:
        denied = wait_for(
            lambda: (
                (r := run_step(cluster, ["step", "cordon-node", "--node", node], {}))
                and r.returncode != 0
                and r
            ),
            30,
            "cordon refused once the ClusterRoleBinding is gone",
        )
        assert "forbidden" in (denied.stdout + denied.stderr).lower()
        assert not node_unschedulable(cluster, node)
        cluster.apply(load_docs(CORDON_RBAC))
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
        cluster.apply(load_docs(CORDON_RBAC))  # as deploy/ grants it
