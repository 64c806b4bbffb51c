"""Issue 18 #9 (last part) on the real Argo Server: with its workflow-controller stopped, the
server still takes a submit, and the Workflow stays without a phase (Pending) for good. The
outbox worker (on a virtual clock, so the 60 s bound takes no wall time) follows it through the
real argo-workflows client and tells on-call once, in the act's thread, that it has not
started. Slack stays the stand-in (no Slack server runs here)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.executors.argo import ArgoConfig, ArgoExecutor, Backoff
from remediator.executors.slack import SlackNotifier
from remediator.guard.state import GuardState
from remediator.runtime.clock import VirtualClock
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.worker import Acting, WorkerSettings
from tests.live.conftest import CHANNEL
from tests.live.harness import LiveCluster
from tests.standins.fixtures import slack_config
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from argo import Argo  # noqa: E402

T0 = 1_750_000_000.0
WORKFLOWS = "/apis/argoproj.io/v1alpha1/namespaces/argo/workflows"


@pytest.fixture
def no_controller(cluster: LiveCluster, real_argo: Argo) -> Iterator[Argo]:
    """The server alone: nothing picks a Workflow up. The controller comes back afterwards,
    once the workflows submitted here are gone (else it would run them)."""
    real_argo.stop("workflow-controller")
    try:
        yield real_argo
    finally:
        for wf in cluster.api("GET", WORKFLOWS)["items"]:
            if wf["metadata"]["name"].startswith("delete-pod-"):
                cluster.delete(f"{WORKFLOWS}/{wf['metadata']['name']}")
        real_argo.start_controller()


def worker_for(
    tmp_path: Path, clock: VirtualClock, host: str, token: str, standin: SlackStandin
) -> Acting:
    (tmp_path / "argo-token").write_text(token)
    argo = ArgoExecutor(
        ArgoConfig(
            host=host,
            namespace="argo",
            token_env="REMEDIATOR_TEST_UNSET_ARGO_TOKEN",
            token_file=str(tmp_path / "argo-token"),
        ),
        backoff=Backoff(attempts=1),
    )
    slack = SlackNotifier(slack_config(standin, tmp_path / "slack-token", CHANNEL))
    settings = WorkerSettings(poll_s=5.0, start_within_s=60.0)
    outbox = Outbox(tmp_path / "state.db", clock.now)
    metrics = RuntimeMetrics.on(CollectorRegistry())
    worker = Acting(OutboxRows(outbox), argo, slack, clock, metrics, "live", settings)
    worker.lead(True, None)
    return worker


async def test_a_workflow_the_real_server_takes_and_nothing_starts_is_told_once(
    cluster: LiveCluster,
    no_controller: Argo,
    argo_token: str,
    slack: SlackStandin,
    tmp_path: Path,
) -> None:
    clock = VirtualClock(T0)
    worker = worker_for(tmp_path, clock, no_controller.server_url, argo_token, slack)
    decision = Decision(
        action="delete-pod",
        namespace="llm-inference",
        target="vllm-pending-0",
        reason="engine_init 75s > budget 60s",
        incident="not-started-live",
        at=T0,
        uid="0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
        workload="llm-inference/Deployment/vllm-pending",
    )
    _outbox(worker).record([decision], GuardState())
    for t in range(0, 125, 5):  # a pass every 5 s of virtual time; each poll a real GET
        await clock.advance(T0 + t - clock.now())
        await worker.step()
        await worker.idle()

    (row,) = _outbox(worker).rows()
    assert row.state == "submitted" and row.workflow
    real = cluster.api("GET", f"{WORKFLOWS}/{row.workflow}")
    assert not (real.get("status") or {}).get("phase")  # the real server's Pending: no phase
    act, stuck = slack.posted()
    assert stuck.body["thread_ts"] == act.ts and stuck.body["reply_broadcast"] is True
    assert "Workflow not started" in stuck.body["text"]
    assert row.stuck_ts == stuck.ts
    await worker.close()
    _outbox(worker).close()


def _outbox(worker: Acting) -> Outbox:
    assert isinstance(worker.store, OutboxRows)
    return worker.store.outbox
