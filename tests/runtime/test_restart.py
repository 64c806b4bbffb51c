"""Crash and restart: a decision written to the outbox is carried out exactly once."""

from __future__ import annotations

import socket
import sqlite3
from dataclasses import replace

from remediator.executors.argo import Backoff
from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer


def closed_port_url() -> str:
    """An address where nothing listens: Argo is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_pending_row_survives_a_restart_and_is_submitted_once(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin
) -> None:
    kube.store.create(stuck_pod())
    down = replace(config, argo_server=closed_port_url(), argo_backoff=Backoff(attempts=1))

    # 1. Decided and written, but Argo is unreachable: the service stops with the row pending.
    async with running(down) as first:
        await wait_until(
            lambda: [r for r in first.outbox.rows() if r.attempts >= 1], what="failed attempt"
        )
        rows = first.outbox.rows()
    assert [(r.decision.action, r.state) for r in rows] == [("delete-pod", "pending")]
    assert argo.workflows == {}

    # 2. A new process on the same state: resumes the row, submits it once, tracks it.
    async with running(config) as second:
        done = await wait_until(
            lambda: [r for r in second.outbox.rows() if r.state == "ended"], what="ended"
        )
        all_rows = second.outbox.rows()
    assert len(all_rows) == 1, "the restarted session must not decide the incident again"
    assert done[0].phase == "Succeeded"
    assert len(argo.workflows) == 1
    assert len(list(argo.submitted())) == 1


async def test_a_submit_whose_outcome_was_lost_is_a_409_and_counted_done(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin
) -> None:
    kube.store.create(stuck_pod())
    async with running(config) as first:
        await wait_until(lambda: [r for r in first.outbox.rows() if r.state == "ended"])
    # A crash after Argo created the workflow but before the row said so.
    with sqlite3.connect(config.state_db) as db:
        db.execute("UPDATE outbox SET state = 'pending', workflow = NULL, phase = NULL")

    async with running(config) as second:
        done = await wait_until(
            lambda: [r for r in second.outbox.rows() if r.state == "ended"], what="ended"
        )
        duplicates = second.registry.get_sample_value(
            "remediator_executions_total", {"action": "delete-pod", "result": "duplicate"}
        )
    submits = [r for r in argo.requests if r.path.endswith("/submit")]
    assert len(submits) == 2
    assert len(argo.workflows) == 1, "the re-submit must not create a second workflow"
    assert done[0].workflow in argo.workflows and done[0].phase == "Succeeded"
    assert duplicates == 1.0
