"""The live suite: remediator against a real control plane built from source (tests/cluster).

One cluster per session (etcd, kube-apiserver, controller-manager, scheduler, kwok with fake
8-GPU nodes). The RBAC, namespaces, Lease and warmup DaemonSet come from deploy/, applied to the
real API server; `remediator serve` runs as a subprocess with its ServiceAccount's token. Argo
and Slack stay stand-ins here (tests/standins): the real Argo is the Argo issue's suite. When the
stand-in Argo records a workflow, the harness runs its step's own command line as the workflow
ServiceAccount against the real API server, so every effect is real.

No skips: if the cluster cannot come up, every test here fails and says why.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live.harness import NS, POLICY, LiveCluster, Serve, install_deploy, wait_for
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import argo_fixture, slack_fixture
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import Cluster, ClusterError  # noqa: E402

ARGO_TOKEN = "argo-live-token-5b7e"
SLACK_TOKEN = "xoxb-live-test"
CHANNEL = "#llm-oncall"


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    home = tmp_path_factory.mktemp("cluster")
    raw = Cluster(home)
    try:
        raw.up(nodes=4)
    except ClusterError as exc:
        pytest.fail(f"the real control plane did not come up: {exc}", pytrace=False)
    try:
        live = LiveCluster(raw)
        install_deploy(live)
        yield live
    finally:
        raw.down()


argo = argo_fixture(ARGO_TOKEN)
slack = slack_fixture(SLACK_TOKEN, frozenset({CHANNEL}))


@pytest.fixture
def serve(
    cluster: LiveCluster, argo: ArgoStandin, slack: SlackStandin, tmp_path: Path
) -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def start(
        identity: str = "remediator-0",
        policy: str = POLICY,
        kubeconfig: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> Serve:
        env = {
            "SLACK_BOT_TOKEN": SLACK_TOKEN,
            "SLACK_API_URL": slack.url,
            "SLACK_CHANNEL": CHANNEL,
            **(env or {}),
        }
        s = Serve(
            cluster,
            tmp_path / identity,
            policy,
            argo.url,
            ARGO_TOKEN,
            identity,
            extra_env=env,
            kubeconfig=kubeconfig,
        )
        started.append(s)
        return s.start()

    yield start
    for s in started:
        s.stop()


@pytest.fixture
def workloads(cluster: LiveCluster) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """Create Deployments for one test; delete them (and wait for their pods to go) after."""
    made: list[str] = []

    def create(doc: dict[str, Any]) -> dict[str, Any]:
        cluster.apply([doc])
        made.append(doc["metadata"]["name"])
        return doc

    yield create
    for name in made:
        cluster.delete(f"/apis/apps/v1/namespaces/{NS}/deployments/{name}")
    for name in made:
        sel = f"app.kubernetes.io/name={name}"
        wait_for(lambda sel=sel: not cluster.pods(NS, sel), 60, f"pods of {sel} gone")
