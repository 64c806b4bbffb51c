"""A stuck vLLM pod, end to end, with every part real: watch → timer → outbox → Argo → Slack."""

from __future__ import annotations

import sqlite3

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import NS, running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer
from tests.standins.slack_server import SlackStandin


def outbox_rows(cfg: ServiceConfig) -> list[tuple[str, str, str | None, str | None]]:
    with sqlite3.connect(cfg.state_db) as db:
        return db.execute(
            "SELECT action, state, workflow, phase FROM outbox ORDER BY id"
        ).fetchall()


async def test_stuck_pod_is_deleted_through_argo_and_told_in_slack(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin, slack: SlackStandin
) -> None:
    created = kube.store.create(stuck_pod())
    uid = created["metadata"]["uid"]
    async with running(config) as service:
        row = await wait_until(
            lambda: [r for r in service.outbox.rows() if r.state == "ended"], what="ended row"
        )
        # the end reply is posted after the row is marked ended
        await wait_until(lambda: len(slack.posted()) >= 2, what="act and end told")
        ready = service.runtime.ready()
    assert ready == (True, "policy loaded; 4 watches synced")
    assert len(row) == 1 and row[0].decision.action == "delete-pod"
    assert row[0].decision.uid == uid and row[0].phase == "Succeeded"

    # Argo: exactly one workflow, from the right template, for this pod instance.
    assert len(argo.workflows) == 1
    ((name, wf),) = argo.workflows.items()
    assert name == row[0].workflow
    assert wf["spec"]["workflowTemplateRef"]["name"] == "delete-stuck-inference-pod"
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert (params["namespace"], params["pod"], params["uid"]) == (NS, "vllm-llama-70b-0", uid)
    assert params["workload"] == f"{NS}.statefulset.vllm-llama-70b"
    assert argo.problems == []

    # Slack: the act message, then the end as a reply in its thread.
    posted = slack.posted()
    assert len(posted) == 2
    act, end = posted
    assert "delete-pod llm/vllm-llama-70b-0" in act.body["text"]
    assert end.body.get("thread_ts") == act.ts
    assert "Succeeded" in end.body["text"]

    # What is on disk after shutdown agrees.
    assert outbox_rows(config) == [("delete-pod", "ended", name, "Succeeded")]
