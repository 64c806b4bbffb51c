"""`remediator ingest`'s HTTP edge on the real broker: 202 once acked, with each document
on the topic under its pod's key, in an envelope in the pod's partition; 400 and nothing
on the topic for a bad body; 401 without the token; /metrics, /healthz, /readyz."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
from prometheus_client import CollectorRegistry

from remediator.runtime.clock import VirtualClock
from remediator.sources.http import Listen, serve_app
from remediator.streams.core import unpack
from remediator.streams.ingest import Publisher, make_ingest_app
from remediator.streams.keys import partition_of
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import config, whole_topic

TOKEN = "ingest-test-token"


def alert(pod: str) -> dict[str, object]:
    return {"status": "firing", "startsAt": "2025-03-01T08:00:00Z", "fingerprint": pod,
            "labels": {"alertname": "VllmPodStuck", "namespace": "llm", "pod": pod}}  # fmt: skip


async def records(cfg) -> list[tuple[bytes, bytes]]:
    """(key, document) of every document on the inputs topic, out of their envelopes; a
    document in another partition than its key's would be lost to its pod."""
    out = []
    for r in await whole_topic(cfg.bootstrap, cfg.inputs):
        for doc in unpack(r.value):
            assert partition_of(doc.key, cfg.inputs.partitions) == r.partition
            out.append((doc.key.encode(), bytes(doc.raw)))
    return out


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


async def envelopes(cfg) -> list[bytes]:
    """The inputs topic's records as they are (each an envelope)."""
    return [r.value for r in await whole_topic(cfg.bootstrap, cfg.inputs)]


def firing(pod: str) -> bytes:
    return orjson.dumps({"version": "4", "status": "firing", "alerts": [alert(pod)]})


async def test_bodies_that_come_together_share_an_envelope_sent_after_the_linger(
    bootstrap: str,
) -> None:
    """The linger runs on the ingest's own clock: until it moved, nothing is sent (and
    no 202 given); then each partition's documents go as one record, in order."""
    cfg = config(bootstrap, "linger")
    await ensure_topics(cfg)
    clock, registry = VirtualClock(), CollectorRegistry()
    pub = Publisher(cfg, registry, clock=clock, linger_s=0.005)
    await pub.start()
    pods = [f"vllm-{i:02d}" for i in range(40)]
    try:
        publishing = asyncio.gather(*(pub.publish(firing(p)) for p in pods))
        await asyncio.sleep(0.5)  # the wall clock moves; the ingest's does not
        assert not publishing.done()
        assert await envelopes(cfg) == []
        await clock.advance(0.005)
        assert await publishing == [1] * len(pods)
        on_topic = await envelopes(cfg)
    finally:
        await pub.stop()
    assert 1 < len(on_topic) <= cfg.inputs.partitions  # one envelope per partition
    assert registry.get_sample_value("remediator_ingest_envelopes_total") == len(on_topic)
    assert registry.get_sample_value("remediator_ingest_records_total") == len(pods)
    by_partition = [[d.key for d in unpack(v)] for v in on_topic]
    assert sorted(k for keys in by_partition for k in keys) == [f"llm/{p}" for p in pods]
    for keys in by_partition:
        assert keys == sorted(keys), "in the order they came"


async def test_a_full_envelope_goes_without_waiting_for_the_linger(bootstrap: str) -> None:
    cfg = config(bootstrap, "full")
    await ensure_topics(cfg)
    pub = Publisher(cfg, clock=VirtualClock(), envelope_bytes=1)  # full at its first document
    await pub.start()
    try:
        assert await pub.publish(firing("vllm-a")) == 1  # the ingest's clock never moved
        await pub.tick(1_700_000_000.0)  # a tick to every partition: one record each
        on_topic = await envelopes(cfg)
    finally:
        await pub.stop()
    assert len(on_topic) == 1 + cfg.inputs.partitions
    assert all(len(unpack(v)) == 1 for v in on_topic)
