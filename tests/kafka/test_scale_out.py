"""Two workers on a real Kafka broker decide what one embedded process decides.

Real: the broker (Apache Kafka 4.0, KRaft, from Maven Central), faust-streaming and
aiokafka, the workers as separate processes. The stream is the simulator's (many pods,
stuck ones among them); it is published in chunks of stream time, each followed by a
tick to every partition, and the pipeline is let go idle between chunks, as live
traffic is (a retry's round trip of milliseconds against its 30 s interval).
"""

from __future__ import annotations

from pathlib import Path

from remediator.policy.config import PolicyConfig
from remediator.streams.ingest import Publisher
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import Worker, chunks, commands, config, dump, embedded, key, wait_idle

PODS, SEED, STEP_S, TAIL_S = 120, 3, 30.0, 900.0


async def publish(pub: Publisher, stream, cfg, workers, start: int = 0, stop: int | None = None):
    for chunk in stream[start:stop]:
        for line in chunk.lines:
            await pub.publish(line)
        await pub.tick(chunk.until)
        await wait_idle(cfg, workers=workers)


async def test_two_workers_decide_as_one_embedded_process(bootstrap: str, tmp_path: Path) -> None:
    cfg = config(bootstrap, "split")
    stream = chunks(PODS, SEED, STEP_S, TAIL_S)
    expected = embedded(stream, PolicyConfig())
    assert len({d.action for d in expected}) == 2, "the stream must make decisions of both kinds"
    await ensure_topics(cfg)
    workers = [Worker(cfg, tmp_path, n) for n in ("a", "b")]
    pub = Publisher(cfg)
    await pub.start()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()
        await publish(pub, stream, cfg, workers)
        got = await commands(cfg)
    finally:
        await pub.stop()
        for w in workers:
            w.stop()
    assert dump(got) == dump(expected)
    assert len(got) == len({key(d) for d in got}), "a decision was sent twice"
    for w in workers:  # both took part: the partitions were split between them
        assert "partition rebuilt" in w.log_path.read_text()
