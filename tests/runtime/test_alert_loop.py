"""The alert path live: the real Prometheus scrapes serve, evaluates deploy/'s rule, the real
Alertmanager posts to serve with deploy/'s receiver, serve decides and submits to Argo (the
stand-in: no Argo server runs here for this test; tests/workflows runs the real one).

Only timings are short (1 s scrape and evaluation, group_wait 0s, repeat every 2 s); nothing
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from remediator.runtime.service import ServiceConfig
from tests.promstack import (
    Stack,
    Timings,
    alertmanager_config,
    rule_groups,
    start_alertmanager,
    start_prometheus,
)
from tests.runtime.conftest import NS, WEBHOOK_TOKEN, running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer

# The timer must not act: only the alert can. Everything else as in the runtime tests.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm]
  budgets: {engine_init: 3600, container_start: 3600}
  checks: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
alerts:
  stuck_pod: [VLLMEngineInitSlow]
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def _count(service: object, name: str, labels: dict[str, str]) -> float:
    value = service.registry.get_sample_value(name, labels)  # type: ignore[attr-defined]
    return value or 0.0


async def test_rule_fires_alertmanager_posts_serve_acts_once(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin, tmp_path: Path
) -> None:
    pod = kube.store.create(stuck_pod(started_ago_s=120))  # past the rule's 60 s at once
    uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
    timings = Timings()
    token = tmp_path / "webhook-token"
    token.write_text(WEBHOOK_TOKEN)
    async with running(config) as service:
        hook = f"http://127.0.0.1:{service.port}/events"
        am = start_alertmanager(tmp_path, alertmanager_config(hook, token, timings))
        stack = Stack(am, am, [am])
        try:
            prom = start_prometheus(
                tmp_path,
                {"remediator": f"127.0.0.1:{service.port}"},
                timings,
                rule_groups(timings),
                am.url,
            )
            stack = Stack(prom, am, [am, prom])

            def firing() -> float:
                labels = {"alertname": "VLLMEngineInitSlow", "status": "firing"}
                return _count(service, "remediator_alerts_received_total", labels)

            await wait_until(lambda: argo.workflows, timeout=60, what="a workflow")
            # Alertmanager repeats the firing alert (repeat_interval 2s): serve holds them.
            await wait_until(lambda: firing() >= 3, timeout=60, what="two repeats")
            assert len(argo.workflows) == 1
            held = _count(
                service,
                "remediator_suppressed_total",
                {"action": "delete-pod", "guardrail": "idempotency"},
            )
            assert held >= 2

            # The workflow's delete, as Argo would run it: the series ends, the alert resolves.
            kube.store.delete(kube.resource("v1", "pods"), NS, name, {}, False)

            def resolved() -> float:
                labels = {"alertname": "VLLMEngineInitSlow", "status": "resolved"}
                return _count(service, "remediator_alerts_received_total", labels)

            await wait_until(resolved, timeout=60, what="the resolved notification")
            await asyncio.sleep(0.5)  # let the consumer settle what it was handed
            rules = stack.prometheus.get("/api/v1/rules?type=alert")["data"]["groups"]
        finally:
            stack.stop()
        rows = service.outbox.rows()
    assert len(argo.workflows) == 1 and argo.problems == []
    ((_, wf),) = argo.workflows.items()
    params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
    assert (params["namespace"], params["pod"], params["uid"]) == (NS, name, uid)
    assert [(r.decision.action, r.decision.uid) for r in rows] == [("delete-pod", uid)]
    assert rows[0].decision.reason.startswith("alert VLLMEngineInitSlow firing; pod in engine_init")
    # The rule the test loaded is deploy/'s (only its timings differ).
    names = {r["name"] for g in rules for r in g["rules"]}
    assert {"VLLMEngineInitSlow", "VLLMEngineInitP95High", "RemediatorDown"} <= names
