"""Issue 19's differential on a real broker: each stream (tests/data's recordings, the fleet
simulator's tuned and untuned fleets with 5% engine-init hangs, the untuned one's kill
loops) through one `Session`, one `remediator worker`, and two workers of which one is
SIGKILLed mid-stream, gives the same decisions (action, target, reason), the same
suppressions (guardrail, retry time), the same kill-loop holds, the same cold-start
histograms (for the workers, the sum of what their /metrics show) and the same hedge budget
at the end (paid and spent, on the /metrics of the worker that holds the guard).

Real: Apache Kafka 4.0 (KRaft), faust-streaming, aiokafka, the workers as processes with
the dry-run recorder as executor. The ingest's `Publisher` stamps each record with the
cluster's time on a clock that stands still (delivery is instant here), so the reference
`Session` can be given the same times (tests/kafka/differential.py). A stream is published
chunk by chunk, each followed by a tick, packed into envelopes of many documents as the
ingest packs what comes at once; the pipeline goes idle between chunks.
The killed worker is scraped once the pipeline is idle, just before it dies: what it
counted is lost with it, and its partitions are taken over without counting again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remediator.streams.ingest import Publisher
from remediator.streams.topics import ensure_topics
from tests.kafka.differential import (
    FLEETS,
    FROZEN,
    Observed,
    Stream,
    compact,
    fleet,
    histograms,
    recorded_streams,
    said,
    through_session,
)
from tests.kafka.harness import Lag, Worker, commands, config, group_owner, send_chunk

STREAMS = [s.name for s in recorded_streams()] + list(FLEETS)
PARTITIONS = 4


def stream_named(name: str) -> Stream:
    """The stream with a tick only where one can matter (`compact`)."""
    if name in FLEETS:
        return compact(fleet(name))
    return compact(next(s for s in recorded_streams() if s.name == name))


class Run:
    def __init__(self, pub: Publisher, lag: Lag, workers: list[Worker]) -> None:
        self.pub, self.lag, self.workers = pub, lag, workers
        self.scraped: list[str] = []  # /metrics of the workers killed
        self.pages: list[str] = []  # /metrics of every worker, at the end (or its death)
        self.observed = Observed()

    async def publish(self, stream: Stream, kill_after: int | None = None) -> None:
        """The stream, chunk by chunk; with `kill_after`, once that many lines are in, at
        the end of a chunk (every partition has had a record: see docs/kafka.md) with the
        pipeline idle, a worker is SIGKILLed (the guard's, where one shows)."""
        sent = 0
        for chunk in stream.chunks:
            await send_chunk(self.pub, chunk.lines, chunk.until)  # envelopes of many lines
            sent += len(chunk.lines)
            await self.lag.wait_idle(self.workers)
            if kill_after is not None and sent >= kill_after and not self.scraped:
                self.kill()

    def kill(self) -> None:
        victim = next(group_owner(self.lag.cfg, self.workers), self.workers[0])
        status, body = victim.get("/metrics")
        assert status == 200
        self.scraped.append(body.decode())
        victim.kill()  # no goodbye, no commit, no flush


@asynccontextmanager
async def running(
    bootstrap: str, name: str, tmp: Path, stream: Stream, n: int, guards: int = 1
) -> AsyncIterator[Run]:
    cfg = config(bootstrap, name, PARTITIONS, guards)
    await ensure_topics(cfg)
    tmp.mkdir()
    policy = tmp / "policy.yaml"
    policy.write_text(stream.policy)
    # The broker's least session timeout: a killed worker's partitions move on sooner. A
    # fold every few records (--fold-after): a worker rebuilt from folded tables (the one
    # that takes over the killed one's partitions) must still do what one Session does.
    env = {"REMEDIATOR_POLICY": str(policy), "REMEDIATOR_KAFKA_SESSION_TIMEOUT_S": "6",
           "REMEDIATOR_KAFKA_FOLD_AFTER": "5"}  # fmt: skip
    workers = [Worker(cfg, tmp, f"{name}-{i}", env=env) for i in range(n)]
    pub = Publisher(cfg, clock=FROZEN)
    await pub.start()
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready()
        async with Lag(cfg) as lag:
            run = Run(pub, lag, workers)
            yield run
            alive = [w for w in workers if w.proc is not None and w.proc.poll() is None]
            run.observed.decisions = [said(d) for d in await commands(cfg)]
            restarted = [m for w in workers for m in w.restarts]  # by the liveness probe
            last = [w.get("/metrics")[1].decode() for w in alive]
            run.pages = run.scraped + restarted + last
            run.observed.histograms = histograms(run.pages)
            run.observed.budget = budget_shown(last)
    finally:
        await pub.stop()
        for w in workers:
            w.kill()  # what they said is read already (their logs are written per line)
    run.observed.suppressions = [h for w in workers for h in suppressed(w)]


def suppressed(worker: Worker) -> list[tuple[str, str, float | None, float]]:
    """What the worker's guard held, from its structured log (killed or not)."""
    out = []
    for line in worker.log_path.read_text().splitlines():
        if '"suppressed"' not in line:
            continue
        doc = json.loads(line)
        if doc.get("msg") == "suppressed":
            out.append((doc["incident"], doc["guardrail"], doc["retry_at"], doc["decided_at"]))
    return out


def assert_same(reference: Observed, got: Observed, what: str) -> None:
    assert got.decisions == reference.decisions, f"{what}: decisions"
    assert got.holds == reference.holds, f"{what}: kill-loop holds"
    assert got.suppressions == reference.suppressions, f"{what}: suppressions"
    assert got.histograms == reference.histograms, f"{what}: cold-start histograms"
    assert got.budget == reference.budget, f"{what}: the hedge budget (paid, spent)"


def budget_shown(pages: list[str]) -> tuple[float, float] | None:
    """The hedge budget (paid, spent) on the /metrics of the one worker that holds the
    guard (the cluster tier where it is split) at the end: the others show none."""
    shown = [
        {s.labels["what"]: s.value for s in family.samples}
        for page in pages
        for family in text_string_to_metric_families(page)
        if family.name == "remediator_hedge_budget_gpu_seconds" and family.samples
    ]
    assert len(shown) <= 1, f"the hedge budget shown by {len(shown)} workers"
    return (round(shown[0]["paid"], 6), round(shown[0]["spent"], 6)) if shown else None


async def through_workers(
    bootstrap: str, tmp: Path, stream: Stream, tag: str, n: int, guards: int = 1
) -> Run:
    """`n` workers on the stream; with two, one is SIGKILLed halfway through its lines.
    `guards` > 1: the guard split by workload over that many candidates partitions."""
    name = f"{tag}-{n}" + (f"-t{guards}" if guards > 1 else "")
    async with running(bootstrap, name, tmp / f"workers-{name}", stream, n, guards) as run:
        await run.publish(stream, kill_after=stream.inputs // 2 if n > 1 else None)
    return run


@pytest.mark.parametrize("name", STREAMS)
async def test_one_worker_and_two_with_one_killed_do_what_one_session_does(
    bootstrap: str, tmp_path: Path, name: str
) -> None:
    stream = stream_named(name)
    reference = through_session(stream).sorted()
    assert reference.histograms, "the stream must show cold starts"
    tag = "".join(c if c.isalnum() else "-" for c in name)[:40]
    # The two runs share nothing (topics, group, tables): side by side, to save time.
    one, two = await asyncio.gather(
        through_workers(bootstrap, tmp_path, stream, tag, 1),
        through_workers(bootstrap, tmp_path, stream, tag, 2),
    )
    assert_same(reference, one.observed.sorted(), "one worker")
    assert len(two.scraped) == 1, "a worker was killed mid-stream"
    # Redelivered after the kill, a verdict may be said twice: each is compared once.
    assert_same(reference.once(), two.observed.once(), "two workers, one killed")


def scraped_sum(pages: list[str], name: str, label: str, value: str) -> float:
    """A sample's values with that label, summed over the workers' /metrics."""
    return sum(
        s.value
        for page in pages
        for family in text_string_to_metric_families(page)
        for s in family.samples
        if s.name == name and s.labels.get(label) == value
    )


TIERED = ["fleet untuned, seed rule (kill loops)", "fleet tuned, hedged, GPUs short"]


@pytest.mark.parametrize("name", TIERED)
async def test_the_guard_split_by_workload_does_what_one_session_does(
    bootstrap: str, tmp_path: Path, name: str
) -> None:
    """The guard split by workload (--guard-partitions 3: a first tier per candidates
    partition, the second over the admitted topic): one worker, and two with one SIGKILLed
    mid-stream, give what one `Session` gives, on the streams whose guardrails are busiest
    (kill-loop holds; hedges through, held by the budget and for GPUs short)."""
    stream = stream_named(name)
    reference = through_session(stream).sorted()
    tag = "".join(c if c.isalnum() else "-" for c in name)[:40]
    one, two = await asyncio.gather(
        through_workers(bootstrap, tmp_path, stream, tag, 1, guards=3),
        through_workers(bootstrap, tmp_path, stream, tag, 2, guards=3),
    )
    assert_same(reference, one.observed.sorted(), "one worker, the guard split")
    for run in (one, two):  # the second tier settled: the split guard, not one
        batches = scraped_sum(run.pages, "remediator_kafka_stage_seconds_count", "agent", "settle")
        assert batches > 0, [p for p in run.pages if "stage" in p]
    # One worker holds every tier: it passed records between them in process too.
    passed = scraped_sum(one.pages, "remediator_kafka_tier_words_total", "via", "process")
    assert passed > 0, [p for p in one.pages if "tier_words" in p]
    assert len(two.scraped) == 1, "a worker was killed mid-stream"
    assert_same(reference.once(), two.observed.once(), "two workers, one killed, the guard split")
