"""A deleted pod's rows leave the worker's pods table (its changelog, on a real broker)
once the pod's grace has passed, and a worker rebuilt from what is left knows it is gone.

Real broker, real worker process; the changelog topic is read as Faust restores it (the
last value of each key; a tombstone deletes the key)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from remediator.streams.config import StreamsConfig
from remediator.streams.core import FORGET_AFTER_S
from remediator.streams.ingest import Publisher
from remediator.streams.pods import PartitionRows
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import Lag, Worker, config
from tests.policy.builders import T0, pod
from tests.streams.test_pods import ALIVE, GONE, life


async def table(cfg: StreamsConfig) -> dict[str, Any]:
    """The pods table as its changelog restores it."""
    topic = f"{cfg.group}-pods-changelog"
    consumer = AIOKafkaConsumer(bootstrap_servers=cfg.bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(cfg.inputs.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        out: dict[str, Any] = {}
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                for r in records:
                    name = orjson.loads(r.key)
                    if r.value is None:
                        out.pop(name, None)
                    else:
                        out[name] = orjson.loads(r.value)
        return out
    finally:
        await consumer.stop()


def pods_in(rows: dict[str, Any]) -> set[str]:
    """The pods whose records the table holds (not the guard's feedback, kept apart)."""
    keys = {e[2] for name, value in rows.items() if "|0" in name for e in value}
    return {k for k in keys if not k.startswith("\x00")}


@asynccontextmanager
async def one_worker(cfg: StreamsConfig, worker: Worker) -> AsyncIterator[tuple[Publisher, Lag]]:
    """The topics made, the worker up, a publisher and the group's lag; all stopped after."""
    await ensure_topics(cfg)
    pub = Publisher(cfg)
    await pub.start()
    try:
        worker.start()
        worker.wait_ready()
        async with Lag(cfg) as lag:
            yield pub, lag
    finally:
        await pub.stop()
        worker.stop()


def sample(worker: Worker, name: str) -> float:
    status, body = worker.get("/metrics")
    assert status == 200
    (value,) = [line.split()[1] for line in body.decode().splitlines() if line.startswith(name)]
    return float(value)


async def test_a_deleted_pods_rows_leave_the_table(bootstrap: str, tmp_path: Path) -> None:
    cfg = config(bootstrap, "prune")
    worker = Worker(cfg, tmp_path, "a", batch=5)
    async with one_worker(cfg, worker) as (pub, lag):
        for doc in life(GONE, "uid-gone", 0.0, deleted=True):
            await pub.publish(orjson.dumps(doc))
        for doc in life(ALIVE, "uid-live", 100.0, deleted=False):
            await pub.publish(orjson.dumps(doc))
        await pub.tick(T0 + 300.0)
        await lag.wait_idle([worker])
        assert pods_in(await table(cfg)) == {f"llm/{GONE}", f"llm/{ALIVE}"}
        await pub.tick(T0 + 160.0 + FORGET_AFTER_S + 200.0)  # its grace has passed
        await lag.wait_idle([worker])
        assert sample(worker, "remediator_kafka_pruned_pods_total") == 1
        rows = await table(cfg)
        assert pods_in(rows) == {f"llm/{ALIVE}"}, rows.keys()
        assert any("|L" in name for name in rows), "the cold start it finished is kept"
        worker.kill()
        worker.start()  # rebuilt from the pruned table: the pod is not brought back
        worker.wait_ready()
        await pub.tick(T0 + 2 * FORGET_AFTER_S + 1000.0)
        await lag.wait_idle([worker])
        assert sample(worker, "remediator_kafka_partition_rebuilds_total") == 8
        assert sample(worker, "remediator_kafka_pruned_pods_total") == 0
        assert pods_in(await table(cfg)) == {f"llm/{ALIVE}"}


HELD = """
stuck_pod:
  budgets: {engine_init: 30}
  checks: 1
  check_interval_s: 10
  expected_cold_start_s: 3600
  adaptive: {enabled: false}
guardrails:
  min_age: {factor: 1}
"""


def entries_of(rows: dict[str, Any], key: str) -> list[list[Any]]:
    return [e for name, value in rows.items() if "|0" in name for e in value if e[2] == key]


async def test_a_forgotten_pods_not_yets_leave_the_table_with_it(
    bootstrap: str, tmp_path: Path
) -> None:
    """A pod held until old enough gets the guard's "not yet" (a `RetryAt`, fed in process
    and kept in the partition's rows to be fed again on a rebuild). Kept under the guard's
    feedback key, such rows were never pruned: a worker rebuilt a year of them. Under the
    pod's key they go with the pod; what got through (the kill-loop memory) stays."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(HELD)
    cfg = config(bootstrap, "prune-held")
    worker = Worker(cfg, tmp_path, "a", batch=5, policy=policy)
    hung = f"llm/{GONE}"
    async with one_worker(cfg, worker) as (pub, lag):
        await pub.publish(orjson.dumps(pod(GONE, "uid-hung", watch="ADDED", created=0.0)))
        await pub.publish(orjson.dumps(pod(GONE, "uid-hung", created=0.0, scheduled=1.0,
                                           started=10.0)))  # fmt: skip
        await pub.tick(T0 + 120.0)
        await lag.wait_idle([worker])
        held = entries_of(await table(cfg), hung)
        assert any(e[1].startswith('{"remediator":"feedback"') for e in held), held
        await pub.publish(orjson.dumps(pod(GONE, "uid-hung", watch="DELETED", created=0.0,
                                           scheduled=1.0, started=10.0)))  # fmt: skip
        await pub.tick(T0 + 200.0 + FORGET_AFTER_S + 200.0)
        await lag.wait_idle([worker])
        rows = await table(cfg)
        assert entries_of(rows, hung) == [], "its records and its not-yets are gone"
        kept = [e[1] for e in entries_of(rows, "\x00feedback")]
        assert not [raw for raw in kept if GONE in raw and "retry" in raw.lower()], kept


async def test_a_partitions_learned_history_is_folded_and_a_rebuild_reads_the_fold(
    bootstrap: str, tmp_path: Path
) -> None:
    """Every finished cold start is learned by every partition: its own pods' stay in `L`
    rows once pruned, the others' come relayed by the guard. Folded (`--fold-after`), a
    partition keeps of each model's phase only the last `adaptive.window` learned before
    its oldest live pod, and a worker rebuilt from the folded changelog runs on."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("stuck_pod:\n  adaptive: {window: 5}\n")
    cfg = config(bootstrap, "fold")
    worker = Worker(cfg, tmp_path, "a", batch=5, policy=policy, extra=["--fold-after", "3"])
    async with one_worker(cfg, worker) as (pub, lag):
        end = 0.0
        for n in range(24):
            name = f"vllm-70b-7c9d5b6f4-f{n:03d}"
            for doc in life(name, f"uid-fold-{n}", 200.0 * n, deleted=True):
                await pub.publish(orjson.dumps(doc))
            end = 200.0 * n + 160.0
            await pub.tick(T0 + end + FORGET_AFTER_S + 1.0)  # the pods before: forgotten
        await lag.wait_idle([worker])
        assert sample(worker, "remediator_kafka_learned_folds_total") >= 1
        rows = await table(cfg)
        folded = [p for p in range(cfg.inputs.partitions) if f"{p}|Lfolded" in rows]
        assert folded, rows.keys()
        for p in folded:
            per: dict[tuple[str, str], int] = {}
            for _, model, phase, _ in PartitionRows(rows, p).folded()[1]:
                per[model, phase] = per.get((model, phase), 0) + 1
            assert per and max(per.values()) <= 5, per
        worker.kill()
        worker.start()  # rebuilt from the folded table
        worker.wait_ready()
        name = "vllm-70b-7c9d5b6f4-after"
        for doc in life(name, "uid-fold-after", end + 100.0, deleted=False):
            await pub.publish(orjson.dumps(doc))
        await pub.tick(T0 + end + 400.0)
        await lag.wait_idle([worker])
        assert sample(worker, "remediator_kafka_partition_rebuilds_total") == 8
        assert sample(worker, "remediator_kafka_input_errors_total") == 0
        assert f"llm/{name}" in pods_in(await table(cfg))
