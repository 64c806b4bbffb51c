"""Agents take records in batches and commit every batch, the last one too.

Real broker, real worker process. The batch size (7) does not divide the stream, so the
last batch of each agent is a short one (what was waiting): the group's lag reaches 0
only if that batch is acked and committed. The worker is then
SIGKILLed (no goodbye commit could hide a missing one) and started again: nothing is
delivered to it again, so nothing is decided again.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.streams.ingest import Publisher
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import Lag, Worker, chunks, commands, config, key

BATCH = 7


def sample(worker: Worker, name: str) -> float:
    status, body = worker.get("/metrics")
    assert status == 200
    (value,) = [line.split()[1] for line in body.decode().splitlines() if line.startswith(name)]
    return float(value)


async def test_every_batch_is_committed_and_nothing_is_decided_again(
    bootstrap: str, tmp_path: Path
) -> None:
    stream = chunks(pods=12, seed=5, step_s=30.0, tail_s=900.0)
    cfg = config(bootstrap, "batches")
    await ensure_topics(cfg)
    worker = Worker(cfg, tmp_path, "a", batch=BATCH)
    registry = CollectorRegistry()
    pub = Publisher(cfg, registry)
    await pub.start()
    try:
        worker.start()
        worker.wait_ready()
        async with Lag(cfg) as lag:
            ticks = 0
            for chunk in stream:
                for line in chunk.lines:
                    await pub.publish(line)
                await pub.tick(chunk.until)
                ticks += 1
            acked = registry.get_sample_value("remediator_ingest_records_total")
            assert acked is not None
            if (acked + ticks * cfg.inputs.partitions) % BATCH == 0:
                await pub.tick(stream[-1].until + 1.0)  # then the last batch is a short one
                ticks += 1
            sent = int(acked) + ticks * cfg.inputs.partitions
            await lag.wait_idle([worker])  # committed up to the end of all three topics
            before = await commands(cfg)
            assert before, worker.log_path.read_text()[-4000:]
            # Every input went through the worker, and the guard's feedback that went by
            # the topic (none: one worker holds every partition, and takes it in process).
            by_topic = sample(worker, 'remediator_kafka_feedback_total{via="topic"}')
            assert by_topic == 0
            assert sample(worker, 'remediator_kafka_feedback_total{via="process"}') > 0
            assert sample(worker, "remediator_kafka_records_total") == sent
            worker.kill()
            worker.start()
            worker.wait_ready()
            await lag.wait_idle([worker])
            assert sample(worker, "remediator_kafka_records_total") == 0, "delivered again"
            assert sample(worker, "remediator_kafka_candidates_total") == 0
        after = await commands(cfg)
    finally:
        await pub.stop()
        worker.stop()
    assert sorted(map(key, after)) == sorted(map(key, before)), "decided again after a restart"
