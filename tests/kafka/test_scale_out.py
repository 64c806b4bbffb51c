"""Workers on a real Kafka broker decide what one embedded process decides, and keep
deciding so when one of them is killed, restarted, or the broker restarts.

Real: the broker (Apache Kafka 4.0, KRaft, from Maven Central), faust-streaming and
aiokafka, the workers as separate processes. The executor is the dry-run recorder (one
file shared by the workers), which like Argo takes each workflow name once: a replayed
command records nothing new, so a line twice would be a workflow run twice.

The stream is the simulator's (many pods, stuck ones among them), published through the
ingest's Publisher in chunks of 30 s of stream time, each followed by a tick to every
partition; the pipeline goes idle between chunks, as live traffic does (a retry's round
trip takes milliseconds, its interval 30 s). The policy turns adaptive budgets off:
those are learned per partition (see docs/kafka.md), so with them on the timers of a
partition may fire at other times than one process's would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from remediator.policy_file import load_policy_file
from remediator.streams.config import StreamsConfig
from remediator.streams.ingest import Publisher
from remediator.streams.topics import ensure_topics
from tests.kafka.broker import Broker
from tests.kafka.harness import (
    Chunk,
    Lag,
    Worker,
    chunks,
    commands,
    config,
    dump,
    embedded,
    group_owner,
    key,
    recorded,
    send_chunk,
)

PODS, SEED, STEP_S, TAIL_S = 80, 3, 30.0, 600.0
# A static engine-init budget above the stream's (~236 s): below it the engine holds
# deletions as "budget too tight" on evidence of history, learned per partition.
POLICY = "stuck_pod:\n  adaptive: {enabled: false}\n  budgets: {engine_init: 400}\n"


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture(scope="module")
def stream() -> list[Chunk]:
    return chunks(PODS, SEED, STEP_S, TAIL_S)


@pytest.fixture(scope="module")
def expected(stream: list[Chunk], tmp_path_factory: pytest.TempPathFactory) -> list:
    path = tmp_path_factory.mktemp("policy") / "policy.yaml"
    path.write_text(POLICY)
    decided = embedded(stream, load_policy_file(str(path)))
    actions = {d.action for d in decided}
    assert actions == {"delete-pod", "notify"}, "the stream must make both kinds of decision"
    return decided


class Run:
    def __init__(self, cfg: StreamsConfig, pub: Publisher, lag: Lag, workers: list[Worker]):
        self.cfg, self.pub, self.lag, self.workers = cfg, pub, lag, workers

    async def publish(self, part: list[Chunk]) -> None:
        for chunk in part:
            await send_chunk(self.pub, chunk.lines, chunk.until)
            await self.lag.wait_idle(self.workers)


@asynccontextmanager
async def running(
    bootstrap: str, name: str, tmp: Path, policy: Path, n: int = 2
) -> AsyncIterator[Run]:
    cfg = config(bootstrap, name)
    await ensure_topics(cfg)
    env = {"REMEDIATOR_POLICY": str(policy)}
    workers = [Worker(cfg, tmp, chr(ord("a") + i), env=env) for i in range(n)]
    pub = Publisher(cfg)
    await pub.start()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()
        async with Lag(cfg) as lag:
            yield Run(cfg, pub, lag, workers)
    finally:
        await pub.stop()
        for w in workers:
            w.stop()


def assert_once_each(tmp: Path, decided: list) -> None:
    """Every decision was carried exactly once, under its deterministic name."""
    names = [r["workflow"] for r in recorded(tmp)]
    assert len(names) == len(set(names)), "a workflow was run twice"
    assert sorted(r["incident"] for r in recorded(tmp)) == sorted(d.incident for d in decided)


async def test_two_workers_decide_as_one_embedded_process(
    bootstrap: str, tmp_path: Path, policy_file: Path, stream, expected
) -> None:
    async with running(bootstrap, "split", tmp_path, policy_file) as run:
        await run.publish(stream)
        got = await commands(run.cfg)
        for w in run.workers:  # both took part: the partitions were split between them
            status, body = w.get("/metrics")
            assert status == 200 and b"remediator_kafka_records_total" in body
            assert w.get("/healthz")[0] == 200
    assert dump(got) == dump(expected)
    assert len(got) == len({key(d) for d in got}), "a decision was sent twice"
    assert_once_each(tmp_path, expected)


async def test_a_killed_worker_loses_nothing_and_doubles_nothing(
    bootstrap: str, tmp_path: Path, policy_file: Path, stream, expected
) -> None:
    half = len(stream) // 2
    async with running(bootstrap, "kill", tmp_path, policy_file) as run:
        await run.publish(stream[:half])
        guard_holder = next(group_owner(run.cfg, run.workers))
        assert recorded(tmp_path), "the guard must have history (an action) before the kill"
        guard_holder.kill()  # SIGKILL: no goodbye, no commit, no flush
        survivor = next(w for w in run.workers if w is not guard_holder)
        await run.publish(stream[half:])
        got = await commands(run.cfg)
        status, body = survivor.get("/metrics")
        assert b'remediator_kafka_stage_seconds_count{agent="guard"}' in body
    # Redelivered commands may repeat a decision; none is missing, none is new.
    assert dump(list({key(d): d for d in got}.values())) == dump(expected)
    assert_once_each(tmp_path, expected)


async def test_a_restarted_worker_restores_its_tables(
    bootstrap: str, tmp_path: Path, policy_file: Path, stream, expected
) -> None:
    half = len(stream) // 2
    async with running(bootstrap, "restart", tmp_path, policy_file, n=1) as run:
        await run.publish(stream[:half])
        (only,) = run.workers
        only.stop()  # SIGTERM: memory store, so everything comes back from the changelogs
        only.start()
        only.wait_ready()
        await run.publish(stream[half:])
        got = await commands(run.cfg)
        status, body = only.get("/metrics")
        assert b"remediator_kafka_partition_rebuilds_total 8.0" in body
    assert dump(list({key(d): d for d in got}.values())) == dump(expected)
    assert_once_each(tmp_path, expected)


async def test_a_broker_restart_loses_nothing(
    tmp_path: Path, policy_file: Path, stream, expected
) -> None:
    """Our own broker (not the shared one): it is stopped and started mid-stream."""
    own = Broker(tmp_path / "kafka")
    own.start()
    try:
        half = len(stream) // 2
        async with running(own.bootstrap, "bounce", tmp_path, policy_file) as run:
            await run.publish(stream[:half])
            own.stop()
            own.start()  # same ports, same data directory
            await run.publish(stream[half:])
            got = await commands(run.cfg)
    finally:
        own.stop()
    assert dump(list({key(d): d for d in got}.values())) == dump(expected)
    assert_once_each(tmp_path, expected)


async def test_a_worker_killed_inside_envelopes_applies_each_document_once(
    bootstrap: str, tmp_path: Path, policy_file: Path, stream, expected
) -> None:
    """The biggest chunk goes as envelopes of many documents, and the only worker is
    SIGKILLed as soon as the broker has them, with work left (the group still has lag:
    envelopes not taken yet, one half applied, or applied and not committed; which one
    is up to the scheduler). Started again, it rebuilds from its table (an envelope is
    in it whole or not at all) and is given the uncommitted envelopes again: every
    decision is made, none twice."""
    half = len(stream) // 2
    big = max(range(half), key=lambda i: len(stream[i].lines))
    async with running(bootstrap, "cut", tmp_path, policy_file, n=1) as run:
        (only,) = run.workers
        only.stop()
        only.batch = 1  # an envelope at a time: committed envelope by envelope
        only.start()
        only.wait_ready()
        await run.publish(stream[:big])
        await send_chunk(run.pub, stream[big].lines, stream[big].until)
        only.kill()  # SIGKILL: no goodbye, no commit, no flush
        assert await run.lag() > 0, "killed with work left: the kill cut the chunk short"
        only.start()
        only.wait_ready()
        await run.lag.wait_idle(run.workers)
        await run.publish(stream[big + 1 :])
        got = await commands(run.cfg)
    assert dump(list({key(d): d for d in got}.values())) == dump(expected)
    assert_once_each(tmp_path, expected)
