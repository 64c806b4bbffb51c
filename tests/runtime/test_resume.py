"""What a (new) leader does with rows written earlier: stale ones expire, a thread
posted before a restart gets its end reply, and the workflow runs the service's image."""

from __future__ import annotations

from dataclasses import replace

import pytest

from remediator.executors.argo import Backoff
from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import running, stuck_pod, wait_until
from tests.runtime.test_restart import closed_port_url
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer
from tests.standins.slack_server import SlackStandin

IMAGE = "ghcr.io/remediator/remediator:0.2.0@sha256:" + "ab" * 32


async def test_a_pending_row_older_than_the_freshness_bound_expires_unexecuted(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin, slack: SlackStandin
) -> None:
    kube.store.create(stuck_pod())
    down = replace(config, argo_server=closed_port_url(), argo_backoff=Backoff(attempts=1))
    async with running(down) as first:
        await wait_until(lambda: [r for r in first.outbox.rows() if r.attempts >= 1])
    # Leading again later than the bound: the decision is too old to act on now.
    stale = replace(config, runtime=replace(config.runtime, fresh_for_s=0.001))
    async with running(stale) as second:
        rows = await wait_until(
            lambda: [r for r in second.outbox.rows() if r.state == "expired"], what="expired"
        )
        expired = second.registry.get_sample_value("remediator_outbox_rows", {"state": "expired"})
    assert len(rows) == 1 and "pending longer than" in (rows[0].error or "")
    assert expired == 1.0
    assert argo.workflows == {} and list(argo.submitted()) == []
    assert slack.posted() == []


async def test_the_end_reply_goes_into_the_thread_posted_before_a_restart(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin, slack: SlackStandin
) -> None:
    kube.store.create(stuck_pod())
    argo.default_script = ("Running",)  # still running when the first process stops
    async with running(config) as first:
        row = await wait_until(
            lambda: [r for r in first.outbox.rows() if r.slack_ts and r.state == "submitted"],
            what="submitted and told",
        )
    (act,) = slack.posted()
    assert row[0].slack_ts == act.ts and row[0].workflow is not None
    argo.script(row[0].workflow, "Succeeded")
    async with running(config) as second:
        await wait_until(lambda: [r for r in second.outbox.rows() if r.state == "ended"])
        await wait_until(lambda: len(slack.posted()) >= 2, what="the end reply")
    posted = slack.posted()
    assert len(posted) == 2, "the act message is not posted again"
    end = posted[1]
    assert end.body.get("thread_ts") == act.ts
    assert "Succeeded" in end.body["text"]
    assert len(argo.workflows) == 1


async def test_workflows_run_the_image_named_by_remediator_image(
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REMEDIATOR_IMAGE", IMAGE)  # as the Deployment sets it
    kube.store.create(stuck_pod())
    async with running(config) as service:
        await wait_until(lambda: [r for r in service.outbox.rows() if r.state == "ended"])
    ((_, wf),) = argo.workflows.items()
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert params["remediator-image"] == IMAGE
    assert argo.problems == []


async def test_without_remediator_image_the_templates_default_applies(
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REMEDIATOR_IMAGE", raising=False)
    kube.store.create(stuck_pod())
    async with running(config) as service:
        await wait_until(lambda: [r for r in service.outbox.rows() if r.state == "ended"])
    ((_, wf),) = argo.workflows.items()
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert params["remediator-image"] == "ghcr.io/remediator/remediator:0.1.0"
    submit = next(argo.submitted())
    sent = submit.body["submitOptions"]["parameters"]
    assert not [p for p in sent if p.startswith("remediator-image=")]


async def test_a_bad_remediator_image_fails_the_row_and_submits_nothing(
    config: ServiceConfig,
    kube: KubeApiServer,
    argo: ArgoStandin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REMEDIATOR_IMAGE", "ghcr.io/x/y:v1;rm -rf")
    kube.store.create(stuck_pod())
    async with running(config) as service:
        rows = await wait_until(lambda: [r for r in service.outbox.rows() if r.state == "failed"])
    assert "REMEDIATOR_IMAGE" in (rows[0].error or "")
    assert list(argo.submitted()) == []
