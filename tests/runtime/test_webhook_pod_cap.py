"""Made-up pods posted to /events are bounded (issue 10, #11): 100,000 of them used to add
65 MB. Beyond --max-webhook-pods the oldest are forgotten, and /metrics counts them."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import aiohttp
import orjson

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import WEBHOOK_TOKEN, running, stuck_pod, without_watch

CAP = 50
POSTED = 400


def made_up(i: int) -> bytes:
    pod = stuck_pod(f"made-up-{i}")
    pod["metadata"]["uid"] = f"00000000-0000-4000-8000-{i:012d}"
    return orjson.dumps({"kind": "PodList", "items": [pod]})


async def test_pods_from_webhooks_alone_are_capped_oldest_first(config: ServiceConfig) -> None:
    headers = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    cfg = replace(without_watch(config), max_webhook_pods=CAP)
    async with running(cfg) as service, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{service.port}/events"
        for i in range(POSTED):
            async with http.post(url, data=made_up(i), headers=headers) as r:
                assert r.status == 202
        dropped = "remediator_unwatched_pods_dropped_total"
        while (service.registry.get_sample_value(dropped) or 0) < POSTED - CAP:
            await asyncio.sleep(0.02)
        tracker = service.session.tracker
        assert len(tracker) == CAP and tracker.unwatched == CAP
        assert sorted(t.name for t in tracker) == sorted(
            f"made-up-{i}" for i in range(POSTED - CAP, POSTED)
        )
        async with http.get(f"http://127.0.0.1:{service.port}/metrics") as r:
            text = await r.text()
    assert f"{dropped} {POSTED - CAP:.1f}" in text
    assert f"remediator_unwatched_pods {CAP:.1f}" in text
