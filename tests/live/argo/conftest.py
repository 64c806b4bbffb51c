"""Real Argo Workflows on the real control plane: workflow-controller and `argo server` built from
source (tests/cluster/build-argo) run against the session's cluster (tests/cluster/argo.py);
`remediator serve` submits through that server with the argo-workflows SDK, as the ServiceAccount
deploy/ grants it to. The controller holds every step pod; `StepRunner` runs its command line
against the real API server as the pod's ServiceAccount and releases it with the exit code
(tests/live/argo/kubelet.py says why). Slack stays a stand-in (no Slack server runs here)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.live.argo.kubelet import StepRunner
from tests.live.conftest import CHANNEL, SLACK_TOKEN
from tests.live.harness import POLICY, LiveCluster, Serve
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from argo import Argo  # noqa: E402
from cluster import ClusterError  # noqa: E402


# Package scope: Argo stops once this folder's tests are done, so it adds no load to the rest.
@pytest.fixture(scope="package")
def real_argo(cluster: LiveCluster) -> Iterator[Argo]:
    argo = Argo(cluster.raw)
    try:
        argo.up(hold_steps=True)
        argo.install_templates()
    except ClusterError as exc:
        argo.down()
        pytest.fail(f"real Argo did not come up: {exc}", pytrace=False)
    try:
        yield argo
    finally:
        argo.down()


@pytest.fixture(scope="package")
def argo_token(cluster: LiveCluster, real_argo: Argo) -> str:
    """What the Deployment mounts as ARGO_TOKEN: the remediator ServiceAccount's token, whose
    rights in `argo` are deploy/components/act/argo-submit.yaml's Role."""
    return str(cluster.raw.token("remediator", "remediator"))


@pytest.fixture
def steps(cluster: LiveCluster, real_argo: Argo, tmp_path: Path) -> Iterator[StepRunner]:
    with StepRunner(cluster, tmp_path / "steps") as runner:
        yield runner
    assert runner.errors == [], runner.errors


@pytest.fixture
def serve_argo(
    cluster: LiveCluster, real_argo: Argo, argo_token: str, slack: SlackStandin, tmp_path: Path
) -> Iterator[Callable[..., Serve]]:
    """`remediator serve` against the real Argo Server (or a relay in front of it)."""
    started: list[Serve] = []

    def start(
        identity: str = "remediator-0", argo_url: str | None = None, policy: str = POLICY
    ) -> Serve:
        env = {"SLACK_BOT_TOKEN": SLACK_TOKEN, "SLACK_API_URL": slack.url, "SLACK_CHANNEL": CHANNEL}
        url = argo_url or real_argo.server_url
        s = Serve(cluster, tmp_path / "serve", policy, url, argo_token, identity, extra_env=env)
        started.append(s)
        return s.start()

    yield start
    for s in started:
        s.stop()
