"""`remediator ingest`'s HTTP edge on the real broker: 202 once acked, with the record on
the topic under the pod's key; 400 and nothing on the topic for a bad body; 401 without
the token; /metrics, /healthz, /readyz."""

from __future__ import annotations

import aiohttp
import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from prometheus_client import CollectorRegistry

from remediator.sources.http import Listen, serve_app
from remediator.streams.ingest import Publisher, make_ingest_app
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import config

TOKEN = "ingest-test-token"


def alert(pod: str) -> dict[str, object]:
    return {"status": "firing", "startsAt": "2025-03-01T08:00:00Z", "fingerprint": pod,
            "labels": {"alertname": "VllmPodStuck", "namespace": "llm", "pod": pod}}  # fmt: skip


async def records(cfg) -> list[tuple[bytes, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=cfg.bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(cfg.inputs.name, p) for p in range(cfg.inputs.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                out.extend((r.key, r.value) for r in batch)
        return out
    finally:
        await consumer.stop()


async def test_ingest_answers_after_the_broker_acked(bootstrap: str) -> None:
    cfg = config(bootstrap, "ingest")
    await ensure_topics(cfg)
    registry = CollectorRegistry()
    pub = Publisher(cfg, registry)
    await pub.start()
    runner, port = await serve_app(
        make_ingest_app(pub, registry, lambda: TOKEN), Listen("127.0.0.1", 0)
    )
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    group = {"version": "4", "groupKey": "g", "status": "firing",
             "alerts": [alert("vllm-a"), alert("vllm-b")]}  # fmt: skip
    try:
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/events", data=orjson.dumps(group)) as r:
                assert r.status == 401
            async with http.post(f"{url}/events", data=b'{"version":"4","alerts":[{}]}',
                                 headers=auth) as r:  # fmt: skip
                assert r.status == 400
            assert await records(cfg) == []  # refused whole: nothing reached the broker
            async with http.post(f"{url}/events", data=orjson.dumps(group), headers=auth) as r:
                assert r.status == 202
                assert (await r.json())["accepted"] == 2
            on_topic = await records(cfg)  # right after the 202: already there
            for path in ("/healthz", "/readyz", "/metrics"):
                async with http.get(url + path) as r:
                    assert r.status == 200
                    body = await r.read()
            assert b"remediator_ingest_records_total 2.0" in body
    finally:
        await runner.cleanup()
        await pub.stop()
    assert sorted(k for k, _ in on_topic) == [b"llm/vllm-a", b"llm/vllm-b"]
    assert all(len(orjson.loads(v)["alerts"]) == 1 for _, v in on_topic)
