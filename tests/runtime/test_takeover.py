"""Two replicas, one Lease: each writes its own outbox, only the leader executes, and a
standby that takes over executes its pending rows once (Argo dedupes by name: 409)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from remediator.executors.argo import Backoff
from remediator.runtime.service import Service, ServiceConfig
from tests.runtime.conftest import (
    ARGO_TOKEN,
    LEASE,
    LEASE_NS,
    NS,
    WEBHOOK_TOKEN,
    lease_settings,
    lease_spec,
    running,
    stuck_pod,
    wait_until,
)
from tests.runtime.test_restart import closed_port_url
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer, lease
from tests.standins.slack_server import SlackStandin

REPO = Path(__file__).resolve().parents[2]


def replica(cfg: ServiceConfig, tmp_path: Path, identity: str) -> ServiceConfig:
    return replace(
        cfg, state_db=str(tmp_path / identity / "state.db"), lease=lease_settings(identity)
    )


def gauge(service: Service) -> float | None:
    return service.registry.get_sample_value(
        "remediator_leader", {"identity": service.runtime.leader.identity}
    )


async def test_one_leads_and_a_graceful_stop_hands_over_at_once(
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    slack: SlackStandin,
    tmp_path: Path,
) -> None:
    kube.store.create(lease(LEASE_NS, LEASE))
    # pod-a's Argo is down, so its decision stays pending: the takeover must run it.
    down = replace(config, argo_server=closed_port_url(), argo_backoff=Backoff(attempts=1))
    a = Service(replica(down, tmp_path, "pod-a"))
    await a.start()
    stopped = False
    try:
        await wait_until(a.runtime.leader.is_leader, what="pod-a leads")
        async with running(replica(config, tmp_path, "pod-b")) as b:
            await wait_until(b.runtime.ready, what="standby ready")
            kube.store.create(stuck_pod())
            await wait_until(
                lambda: [r for r in a.outbox.rows() if r.attempts >= 1], what="a tried"
            )
            await wait_until(lambda: b.outbox.rows(), what="the standby wrote the decision too")
            assert [r.state for r in b.outbox.rows()] == ["pending"]
            assert not b.runtime.leader.is_leader() and b.runtime.ready()[0]
            assert (gauge(a), gauge(b)) == (1.0, 0.0)
            assert argo.workflows == {} and slack.posted() == []

            await a.stop()  # graceful: releases the Lease
            stopped = True
            # Released: no holder written (pod-b may already have taken it since).
            released = [p.body["spec"] for p in kube.sent("PUT", f"/leases/{LEASE}")]
            assert any(spec["holderIdentity"] == "" for spec in released), "pod-a released"
            await wait_until(b.runtime.leader.is_leader, what="pod-b takes over")
            done = await wait_until(
                lambda: [r for r in b.outbox.rows() if r.state == "ended"], what="ended"
            )
            assert gauge(b) == 1.0
    finally:
        if not stopped:
            await a.stop()
    assert done[0].phase == "Succeeded"
    assert len(argo.workflows) == 1 and len(list(argo.submitted())) == 1
    spec = lease_spec(kube)
    assert spec["leaseTransitions"] == 2  # pod-a, then pod-b (then released by b)
    act = slack.posted()[0]
    assert "(taken over from pod-a)" in json.dumps(act.body["blocks"])


def serve_replica(
    cfg: ServiceConfig, kubeconfig: str, identity: str, log: Path
) -> subprocess.Popen[bytes]:
    """`remediator serve` as the Deployment runs it: POD_NAME/POD_NAMESPACE set. No
    Slack: serve has no option for a Slack API URL other than slack.com."""
    policy = cfg.policy
    assert policy is not None and cfg.argo_server
    env = {
        **os.environ,
        "POD_NAME": identity,
        "POD_NAMESPACE": LEASE_NS,
        "REMEDIATOR_LEASE_NAME": LEASE,
        "ARGO_TOKEN": ARGO_TOKEN,
        "REMEDIATOR_WEBHOOK_TOKEN": WEBHOOK_TOKEN,
    }
    args = [
        "--policy", policy, "--listen", "127.0.0.1:0", "--state-db", str(log.parent / "a.db"),
        "--namespaces", NS, "--warmup-daemonset", "", "--kubeconfig", kubeconfig,
        "--argo-server", cfg.argo_server,
        "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2",
    ]  # fmt: skip
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "remediator.serve", *args], cwd=REPO, env=env, stderr=out
        )


async def test_a_killed_leader_is_replaced_after_expiry_and_its_work_is_a_409(
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    slack: SlackStandin,
    tmp_path: Path,
) -> None:
    kube.store.create(lease(LEASE_NS, LEASE))
    kubeconfig = str(kube.write_kubeconfig(tmp_path / "kubeconfig-a"))
    proc = serve_replica(config, kubeconfig, "pod-a", tmp_path / "pod-a.log")
    try:
        await wait_until(
            lambda: lease_spec(kube).get("holderIdentity") == "pod-a", 60, "pod-a leads"
        )
        async with running(replica(config, tmp_path, "pod-b")) as b:
            kube.store.create(stuck_pod())
            await wait_until(lambda: argo.workflows, what="pod-a submitted")
            await wait_until(lambda: b.outbox.rows(), what="the standby wrote the decision")
            assert not b.runtime.leader.is_leader()
            proc.send_signal(signal.SIGKILL)  # no release: the Lease has to expire
            proc.wait(timeout=30)
            assert lease_spec(kube)["holderIdentity"] == "pod-a"
            await wait_until(b.runtime.leader.is_leader, what="pod-b takes over after expiry")
            done = await wait_until(
                lambda: [r for r in b.outbox.rows() if r.state == "ended"], what="ended"
            )
            # the end reply is posted after the row is marked ended
            await wait_until(lambda: len(slack.posted()) >= 2, what="act and end told")
            duplicates = b.registry.get_sample_value(
                "remediator_executions_total", {"action": "delete-pod", "result": "duplicate"}
            )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(argo.workflows) == 1, "the takeover must not create a second workflow"
    assert len(list(argo.submitted())) == 2  # pod-a's, then pod-b's (409)
    assert duplicates == 1.0 and done[0].workflow in argo.workflows
    assert lease_spec(kube)["leaseTransitions"] == 2
    assert [p.body.get("thread_ts") is None for p in slack.posted()] == [True, False]
