"""What the Kafka tests and bench/bench_kafka.py share: workers as processes, the
stream in chunks, the embedded reference, and waiting until the pipeline is idle."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.decode import decode
from remediator.inputs.records import InputError
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile
from remediator.runtime.outbox import decision_from_json
from remediator.session import Session
from remediator.streams.config import StreamsConfig, Topic
from remediator.streams.ingest import Publisher
from remediator.timeline.tracker import StateChange
from tests.kafka.broker import free_port
from tests.simstream import watch_stream

REPO = Path(__file__).resolve().parents[2]
Key = tuple[str, str, str, float]  # incident, action, target, at


def key(d: Decision) -> Key:
    return (d.incident, d.action, f"{d.namespace}/{d.target}", round(d.at, 3))


# ---- the stream ---------------------------------------------------------------------------


@dataclass
class Chunk:
    lines: list[bytes]
    until: float  # stream time the chunk ends at: every partition is ticked to it


def chunks(pods: int, seed: int, step_s: float, tail_s: float) -> list[Chunk]:
    """The simulated watch stream cut every `step_s` of stream time, then `tail_s` of
    ticks alone (timers and retries of the last pods)."""
    out: list[Chunk] = []
    current: list[bytes] = []
    edge: float | None = None
    for line, _ in watch_stream(pods=pods, seed=seed):
        items = decode(line)
        at = max((i.at for i in items if i.at is not None), default=None)
        if at is not None:
            if edge is None:
                edge = at + step_s
            while at > edge:
                out.append(Chunk(current, edge))
                current, edge = [], edge + step_s
        current.append(line)
    assert edge is not None
    out.append(Chunk(current, edge))
    end = edge + tail_s
    while edge < end:
        edge += step_s
        out.append(Chunk([], edge))
    return out


class _Decisions:
    def __init__(self) -> None:
        self.decided: list[Decision] = []

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.decided.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        pass

    def ignored(self, ignored: Ignored) -> None:
        pass


def embedded(stream: list[Chunk], policy: PolicyFile) -> list[Decision]:
    """The reference: one Session (what the embedded runtime runs), fed the same lines,
    its clock moved to the same times."""
    session, sink = Session(policy), _Decisions()
    for chunk in stream:
        for line in chunk.lines:
            for item in decode(line):
                session.feed(item, sink)
        session.advance(chunk.until, sink)
    return sink.decided


async def send_chunk(pub: Publisher, lines: list[bytes], until: float) -> int:
    """A chunk's lines, then a tick to every partition at its end, packed into envelopes
    (many documents each) and sent at once; returns once the broker acked them all. A
    line the ingest refuses (400) is skipped: nothing of it is published."""
    acks: list[asyncio.Future[None]] = []
    taken = 0
    for line in lines:
        with suppress(InputError):
            acks.extend((await pub.enqueue(line))[1])
            taken += 1
    acks.extend(await pub.enqueue_tick(until))
    await pub.flush()
    await asyncio.gather(*acks)
    return taken


# ---- workers ------------------------------------------------------------------------------


def _kafka_flags(c: StreamsConfig) -> list[str]:
    return ["--broker", c.broker, "--group", c.group, "--inputs-topic", c.inputs.name,
            "--inputs-partitions", str(c.inputs.partitions),
            "--candidates-topic", c.candidates.name, "--commands-topic", c.commands.name,
            "--commands-partitions", str(c.commands.partitions),
            "--guard-partitions", str(c.candidates.partitions),
            "--admitted-topic", c.admitted.name]  # fmt: skip


@dataclass
class KafkaProcess:
    """A `remediator` command of the Kafka runtime as its own process on its own loopback
    port, its output in `<workdir>/<kind>-<name>.log`."""

    cfg: StreamsConfig
    workdir: Path
    name: str
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    kind = "worker"

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.port = self.port or free_port()
        cmd = self.command()
        log = open(self.log_path, "ab")  # noqa: SIM115
        # A restore that reads nothing this long fails /healthz (`probe_liveness`).
        env = {**os.environ, "PYTHONPATH": str(REPO), "REMEDIATOR_KAFKA_RECOVERY_STALL_S": "15"}
        env |= self.env
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        log.close()

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} {self.name} exited; see {self.log_path}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{self.kind} {self.name} not ready; see {self.log_path}")

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.kind}-{self.name}.log"

    def log_lines(self) -> Iterator[dict[str, Any]]:
        """Its JSON log lines (others skipped)."""
        for line in self.log_path.read_text(errors="replace").splitlines():
            with suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    yield doc

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@dataclass
class Ingest(KafkaProcess):
    """`remediator ingest`, with the kube watch where `namespaces` are given."""

    namespaces: str = ""
    kubeconfig: Path | None = None
    token: str = "ingest-token-7f3a"

    kind = "ingest"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "remediator", "ingest", *_kafka_flags(self.cfg),
               "--listen", f"127.0.0.1:{self.port}", "--log-level", "INFO",
               "--namespaces", self.namespaces, "--warmup-daemonset", ""]  # fmt: skip
        if self.kubeconfig is not None:
            cmd += ["--kubeconfig", str(self.kubeconfig)]
        self.env = {"REMEDIATOR_WEBHOOK_TOKEN": self.token, **self.env}
        return cmd


@dataclass
class Worker(KafkaProcess):
    """`remediator worker`."""

    argo: str | None = None
    cpus: str | None = None
    batch: int | None = None  # records an agent takes at once (None: the worker's default)
    policy: Path | None = None
    tick_s: float = 0.0  # the worker's own ticks (0: the records' times only)
    extra: list[str] = field(default_factory=list)  # more flags
    # Each time the liveness probe restarted it, what it had counted (its /metrics just
    # before): lost with the process, as a killed worker's is.
    restarts: list[str] = field(default_factory=list)

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "remediator", "worker", *_kafka_flags(self.cfg),
               "--listen", f"127.0.0.1:{self.port}", "--tick", str(self.tick_s),
               "--table-dir", str(self.workdir / f"tables-{self.name}"),
               "--log-level", "INFO", *self.extra]  # fmt: skip
        if self.policy is not None:
            cmd += ["--policy", str(self.policy)]
        if self.batch is not None:
            cmd += ["--batch", str(self.batch)]
        if self.argo:
            cmd += ["--argo-server", self.argo]
        else:
            cmd += ["--dry-run-log", str(self.workdir / "dry-run.jsonl")]  # shared, as Argo is
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus, *cmd]
        return cmd

    def probe_liveness(self) -> bool:
        """What a kubelet's liveness probe does (a stand-in: no kubelet runs these
        processes): a worker whose /healthz fails because its table restore stalled (Faust
        waits for good for changelog records, docs/kafka.md) is scraped, killed and started
        again, with the same name and port; its partitions are restored by the fresh one.
        True: it was restarted."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            status, body = self.get("/healthz")
        except OSError:
            return False
        if status == 200 or b"recovery_stalled" not in body:
            return False
        self.restarts.append(self.get("/metrics")[1].decode())
        print(f"liveness: worker {self.name} restarted: {body.decode()}", file=sys.stderr)
        self.kill()
        self.start()
        return True

    def dump_stacks(self) -> None:
        """Every task's stack into its log (mode's SIGUSR1 handler), for a stuck worker."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)


async def until(
    what: str, check: Callable[[], object], worker: KafkaProcess, timeout: float = 120.0
) -> None:
    """Poll `check` until it holds; fail at once if the process died, else after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_path
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{what}; see {worker.log_path}")


# ---- Kafka views --------------------------------------------------------------------------


def config(bootstrap: str, name: str, partitions: int = 8, guards: int = 1) -> StreamsConfig:
    """Fresh topic names and group per test, so tests sharing one broker never meet.
    `guards`: the candidates topic's partitions (more than 1: the guard split by workload)."""
    return StreamsConfig(
        broker=f"kafka://{bootstrap}",
        group=f"g-{name}",
        inputs=Topic(f"{name}-inputs", partitions),
        candidates=Topic(f"{name}-candidates", guards),
        commands=Topic(f"{name}-commands", 2),
        admitted=Topic(f"{name}-admitted", 1),
    )


class Lag:
    """Records of our three topics the group has not committed yet (one admin client and
    one consumer, kept open: polled often)."""

    def __init__(self, cfg: StreamsConfig) -> None:
        self.cfg = cfg
        self.admin = AIOKafkaAdminClient(bootstrap_servers=cfg.bootstrap)
        self.consumer = AIOKafkaConsumer(bootstrap_servers=cfg.bootstrap)
        self.tps = [TopicPartition(t.name, p) for t in cfg.topics for p in range(t.partitions)]

    async def __aenter__(self) -> Lag:
        await self.admin.start()
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()
        await self.admin.close()

    async def __call__(self) -> int:
        return sum((await self.by_partition()).values())

    async def by_partition(self) -> dict[TopicPartition, int]:
        committed = await self.admin.list_consumer_group_offsets(self.cfg.group)
        ends = await self.consumer.end_offsets(self.tps)
        lag = {}
        for tp in self.tps:
            done = committed.get(tp)
            lag[tp] = ends[tp] - (done.offset if done is not None and done.offset >= 0 else 0)
        return lag

    async def wait_idle(self, workers: list[Worker], timeout: float = 180.0) -> None:
        """Until every record is processed and committed, twice in a row (a retry record
        may be on its way)."""
        deadline = time.monotonic() + timeout
        calm = 0
        probed = time.monotonic()
        while time.monotonic() < deadline:
            for w in workers:
                if w.proc is not None and w.proc.poll() not in (None, -signal.SIGKILL):
                    raise RuntimeError(f"worker {w.name} exited; see {w.log_path}")
            if time.monotonic() - probed >= 1.0:  # a liveness probe's period
                probed = time.monotonic()
                if any([w.probe_liveness() for w in workers]):
                    deadline = max(deadline, time.monotonic() + 60.0)  # the restore's time
            calm = calm + 1 if await self() == 0 else 0
            if calm >= 2:
                return
            await asyncio.sleep(0.05)
        left = await self.by_partition()
        lag = {f"{tp.topic}[{tp.partition}]": n for tp, n in left.items() if n}
        for w in workers:
            w.dump_stacks()
        await asyncio.sleep(2)  # the dumps land in the logs named below
        logs = ", ".join(str(w.log_path) for w in workers)
        raise TimeoutError(f"group {self.cfg.group} still has lag {lag}; stacks in {logs}")


async def whole_topic(bootstrap: str, topic: Topic) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of a topic from its start, partition by partition in offset order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic.name, p) for p in range(topic.partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: list[ConsumerRecord[bytes, bytes]] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=1000)).values():
                out.extend(records)
        return out
    finally:
        await consumer.stop()


async def commands(cfg: StreamsConfig) -> list[Decision]:
    """Every decision on the commands topic, from the start (a note is none)."""
    return [decision_from_json(r.value.decode())
            for r in await whole_topic(cfg.bootstrap, cfg.commands)
            if r.value is not None and not r.value.startswith(b'{"type":')]  # fmt: skip


def group_owner(cfg: StreamsConfig, workers: list[Worker]) -> Iterator[Worker]:
    """The workers whose /metrics show guard work (they hold the candidates partition)."""
    for w in workers:
        status, body = w.get("/metrics")
        if status == 200 and b'remediator_kafka_stage_seconds_count{agent="guard"}' in body:
            yield w


def recorded(workdir: Path) -> list[dict[str, str]]:
    """What the workers' dry-run recorder says would have run."""
    path = workdir / "dry-run.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def dump(decisions: list[Decision]) -> str:
    return json.dumps(sorted(key(d) for d in decisions), indent=1)
