"""POST /events, /healthz, /readyz, /metrics on the real aiohttp server (127.0.0.1:0)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from remediator.runtime.service import Service, ServiceConfig
from tests.data import CAPTURES
from tests.runtime.conftest import NS, WEBHOOK_TOKEN, running, stuck_pod, wait_until

AUTH = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


def watch_event(name: str) -> dict[str, Any]:
    obj = stuck_pod(name)
    obj["metadata"]["uid"] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    obj["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    return {"type": "ADDED", "object": obj}


def tracked(service: Service, name: str) -> bool:
    return service.session.tracker.current(NS, name) is not None


def inputs_total(service: Service) -> float:
    return service.registry.get_sample_value("remediator_inputs_total", {"source": "http"}) or 0.0


async def test_no_token_or_wrong_token_is_401_and_nothing_applied(
    service: Service, http: aiohttp.ClientSession
) -> None:
    body = json.dumps(watch_event("vllm-a"))
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": WEBHOOK_TOKEN}):
        async with http.post("/events", data=body, headers=headers) as resp:
            assert resp.status == 401
            assert "token" in (await resp.json())["error"]
    assert not tracked(service, "vllm-a")


async def test_raw_watch_event_is_accepted_and_reaches_the_tracker(
    service: Service, http: aiohttp.ClientSession
) -> None:
    async with http.post("/events", json=watch_event("vllm-a"), headers=AUTH) as resp:
        assert resp.status == 202
        assert await resp.json() == {"accepted": 1, "kind": "webhook"}
    await wait_until(lambda: tracked(service, "vllm-a"))


async def test_structured_cloudevent(service: Service, http: aiohttp.ClientSession) -> None:
    event = {
        "specversion": "1.0",
        "id": "ev-1",
        "source": "argo-events/inference-workloads",
        "type": "io.k8s.watch.pod",
        "datacontenttype": "application/json",
        "data": watch_event("vllm-b"),
    }
    headers = {**AUTH, "Content-Type": "application/cloudevents+json"}
    async with http.post("/events", data=json.dumps(event), headers=headers) as resp:
        assert resp.status == 202, await resp.text()
        assert (await resp.json())["kind"] == "cloudevent"
    await wait_until(lambda: tracked(service, "vllm-b"))


async def test_binary_mode_cloudevent(service: Service, http: aiohttp.ClientSession) -> None:
    headers = {
        **AUTH,
        "ce-specversion": "1.0",
        "ce-id": "ev-2",
        "ce-source": "argo-events/inference-workloads",
        "ce-type": "io.k8s.watch.pod",
        "Content-Type": "application/json",
    }
    async with http.post("/events", data=json.dumps(watch_event("vllm-c")), headers=headers) as r:
        assert r.status == 202, await r.text()
        assert (await r.json())["kind"] == "cloudevent-binary"
    await wait_until(lambda: tracked(service, "vllm-c"))


async def test_alertmanager_webhook_capture(service: Service, http: aiohttp.ClientSession) -> None:
    capture = CAPTURES / "alertmanager" / "firing_blackbox_icmp_3alerts_v4_2019.json"
    body = capture.read_bytes()
    async with http.post("/events", data=body, headers=AUTH) as resp:
        assert resp.status == 202, await resp.text()
        assert (await resp.json())["accepted"] == len(json.loads(body)["alerts"])
    assert inputs_total(service) == len(json.loads(body)["alerts"])


@pytest.mark.parametrize(
    ("body", "headers", "says"),
    [
        (b"{not json", {}, "not JSON"),
        (b"[1, 2]", {}, "expected a JSON object"),
        (b'{"kind": "Widget", "metadata": {}}', {}, "unknown kind"),
        (b'{"type": "ADDED"}', {"Content-Type": "application/cloudevents+json"}, "specversion"),
        (b"{}", {"ce-specversion": "1.0", "Content-Type": "application/json"}, "CloudEvent"),
    ],
)
async def test_bad_input_is_400_with_a_clear_error(
    service: Service, http: aiohttp.ClientSession, body: bytes, headers: dict[str, str], says: str
) -> None:
    async with http.post("/events", data=body, headers={**AUTH, **headers}) as resp:
        assert resp.status == 400
        doc = await resp.json()
    assert says in doc["error"] and doc["accepted"] == 0
    assert inputs_total(service) == 0
    assert service.registry.get_sample_value("remediator_input_errors_total", {"source": "http"})


async def test_one_bad_item_refuses_the_whole_body(
    service: Service, http: aiohttp.ClientSession
) -> None:
    good = stuck_pod("vllm-good")
    good["metadata"]["uid"] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
    bad = {"metadata": {"name": "no-uid", "namespace": NS}, "spec": {"containers": []}}
    body = {"kind": "PodList", "apiVersion": "v1", "items": [good, bad]}
    async with http.post("/events", json=body, headers=AUTH) as resp:
        assert resp.status == 400
        assert "uid" in (await resp.json())["error"]
    # A later good request is applied; the refused one never was.
    async with http.post("/events", json=watch_event("vllm-after"), headers=AUTH) as resp:
        assert resp.status == 202
    await wait_until(lambda: tracked(service, "vllm-after"))
    assert not tracked(service, "vllm-good")


async def test_health_ready_and_metrics(service: Service, http: aiohttp.ClientSession) -> None:
    async with http.get("/healthz") as resp:
        assert resp.status == 200 and (await resp.json())["ok"] is True
    async with http.get("/readyz") as resp:
        assert resp.status == 200 and (await resp.json())["ready"] is True
    async with http.get("/metrics") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = await resp.text()
    for name in (
        "remediator_cold_start_phase_seconds",
        "remediator_pods_in_phase",
        "remediator_node_engine_pace",
        "remediator_outbox_rows",
        "remediator_inputs_total",
        "remediator_leader",
    ):
        assert f"# TYPE {name}" in text, name


async def test_readyz_waits_for_the_watches(config: ServiceConfig) -> None:
    service = Service(config)
    assert service.runtime.ready()[0] is False  # not started: not ready
    async with running(config) as svc:
        await wait_until(lambda: svc.runtime.ready()[0], what="ready")
        assert "4 watches synced" in svc.runtime.ready()[1]
    service.outbox.close()
