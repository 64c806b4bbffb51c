"""`remediator worker`: the core as a Faust app on Kafka.

Three agents, one per topic (see `streams.core` for what each decides):

  partitions  inputs topic (N partitions, keyed by pod)  -> candidates topic (key "cluster")
  guard       candidates topic (1 partition)             -> commands topic (key incident)
                                                            + retry records back to inputs
  executor    commands topic                             -> the acting component's rows:
                                                            Argo (or the dry-run recorder),
                                                            Slack (streams/executor.py)

State lives in Faust Tables with changelog topics, so a worker that takes over a
partition takes its history with it:

  pods   "<partition>|<offset>" -> the input record at that offset; the partition's
         timelines, incidents and timers are rebuilt from them in offset order (the same
         core, fed the same inputs in the same order)
  guard  one row per key: "state" (the guard state, written when it changed), "pending"
         (candidates waiting for the watermark), "clock", "watermark|<p>", and
         "learned|<model>\n<phase>" (the cluster-wide history of cold starts)

Every worker exports every metric on its /metrics: the cold-start histograms of the
partitions it holds (one set per worker), the guard's decisions and suppressions, and
its own counters.

Delivery is at least once: the producer is flushed before offsets are committed, a
record redelivered after a crash is recognised by its offset, and the executor is
idempotent (the workflow name is derived from the incident: a replayed command
submits nothing new); the acting component's rows live in a table of their own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import faust
from faust.types import TP, EventT, StreamT
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from remediator.contract.codec import encode
from remediator.contract.decision import Decision
from remediator.contract.records import GotThrough
from remediator.core.decider import timeline_metrics
from remediator.core.guard import Verdicts
from remediator.inputs.records import InputError
from remediator.policy_file import PolicyFile
from remediator.runtime.clock import ClusterTime, SystemClock
from remediator.streams.config import StreamsConfig
from remediator.streams.core import (
    INTERNAL,
    Candidate,
    GuardCore,
    Learned,
    PartitionCore,
    Released,
    Watermark,
    feedback_record,
    parse_guard_record,
    tick_record,
)
from remediator.streams.executor import Executors, install_acting, would_have
from remediator.streams.keys import NOW_HEADER
from remediator.streams.metrics import WorkerMetrics

log = logging.getLogger("remediator.worker")

CLUSTER = b"cluster"
TICK = "\x00tick"  # the table key of a partition's last tick
LEARNED = b"\x00learned"  # the key of cold starts relayed to the other partitions


@dataclass
class Partitions:
    """This worker's cores, one per input partition it holds, rebuilt on first use."""

    config: PolicyFile
    count: int
    cores: dict[int, PartitionCore] = field(default_factory=dict)
    applied: dict[int, int] = field(default_factory=dict)  # highest offset in the core

    def drop(self, partitions: set[int]) -> None:
        for p in partitions:
            self.cores.pop(p, None)
            self.applied.pop(p, None)


def arrival(headers: Any) -> float | None:
    """The cluster's time the ingest took a record at (`keys.NOW_HEADER`), if it says."""
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for name, value in pairs:
        if name == NOW_HEADER:
            try:
                return float(value)
            except ValueError:
                return None  # not ours: the record's own stamps move the clock
    return None


def build_app(
    streams: StreamsConfig, policy: PolicyFile, executors: Executors, registry: CollectorRegistry
) -> faust.App:
    app = faust.App(
        streams.group,
        broker=streams.broker,
        store=streams.store,
        datadir=streams.table_dir,
        topic_partitions=streams.inputs.partitions,
        topic_replication_factor=streams.replication,
        topic_allow_declare=True,
        web_bind=streams.web_host,
        web_host=streams.web_host,
        web_port=streams.web_port,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_interval=0.5,
        # A worker that dies (SIGKILL, node loss) is noticed after this: keep it short.
        broker_session_timeout=streams.session_timeout_s,
        broker_heartbeat_interval=min(3.0, streams.session_timeout_s / 3),
        autodiscover=False,
        topic_disable_leader=True,  # one more topic Faust would create with its own count
    )
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes}
    raw |= {"key_serializer": "raw", "value_serializer": "raw"}
    inputs = app.topic(streams.inputs.name, partitions=streams.inputs.partitions, **raw)
    candidates = app.topic(streams.candidates.name, partitions=1, **raw)
    commands = app.topic(streams.commands.name, partitions=streams.commands.partitions, **raw)
    as_json: faust.Schema[Any, Any] = faust.Schema(key_serializer="json", value_serializer="json")
    pods = app.Table("pods", partitions=streams.inputs.partitions, schema=as_json)
    guard_table = app.Table("guard", partitions=1, schema=as_json)
    metrics = WorkerMetrics(registry)
    observed = timeline_metrics(registry)  # every partition this worker holds observes here
    verdicts = Verdicts(registry)  # and its guard counts here
    held = Partitions(policy, streams.inputs.partitions)
    # Ticks move partition clocks on the cluster's time as the inputs show it, carried on
    # by the monotonic clock, never by the local wall clock (see runtime.clock.ClusterTime).
    cluster = ClusterTime(SystemClock())
    guard_box: dict[str, GuardCore] = {}

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(sender: Any, revoked: set[TP], **_: Any) -> None:
        held.drop({tp.partition for tp in revoked if tp.topic == streams.inputs.name})
        if any(tp.topic == streams.candidates.name for tp in revoked):
            guard_box.clear()

    # ---- partitions: inputs -> candidates ----------------------------------------------
    def rebuild(p: int, first: int) -> tuple[PartitionCore, list[Candidate | Learned]]:
        """The partition's core from its table rows; candidates of records at or after
        `first` (the first offset this worker will be given) are sent again, since
        they may not have left the dead worker."""
        # What the worker before had observed is in its /metrics: not counted twice here.
        core = PartitionCore(policy, p, streams.inputs.partitions, metrics=timeline_metrics())
        prefix = f"{p}|"
        rows = sorted(
            (value[0], value[1]) if key.endswith(TICK) else (int(key[len(prefix) :]), value)
            for key, value in pods.items()
            if key.startswith(prefix)
        )
        resend: list[Candidate | Learned] = []
        for offset, row in rows:
            if offset >= first:
                core.decider.metrics = observed
            text, at = (row, None) if isinstance(row, str) else (row[1], row[0])
            out = core.feed(text.encode(), at)
            if offset >= first:
                resend.extend(out)
        core.decider.metrics = observed
        held.applied[p] = rows[-1][0] if rows else -1
        metrics.rebuilds.inc()
        log.info("partition rebuilt", extra={"partition": p, "records": len(rows)})
        return core, resend

    def remember(p: int, offset: int, value: bytes, at: float | None) -> None:
        """One row per record, keyed by its offset: a write costs the record, not the
        pod's whole history. Of the ticks only the last matters. `at`: the cluster's
        time the record arrived at, kept with it (the row is [at, record])."""
        if value.startswith(b'{"remediator":"tick"'):
            pods[f"{p}|{TICK}"] = [offset, value.decode()]
        else:
            pods[f"{p}|{offset:012d}"] = value.decode() if at is None else [at, value.decode()]

    def take(p: int, offset: int, value: bytes, at: float | None = None) -> list[bytes]:
        """One input-topic record into its partition's core: what goes to the guard."""
        core = held.cores.get(p)
        out: list[Candidate | Learned] = []
        if core is None:
            core, out = rebuild(p, offset)
            held.cores[p] = core
        if offset <= held.applied.get(p, -1):
            pass  # already in the table (redelivered after a crash): resent above
        else:
            started = time.perf_counter()
            try:
                out.extend(core.feed(value, at))
            except InputError as exc:
                metrics.input_errors.inc()
                log.warning("bad input skipped", extra={"partition": p, "error": str(exc)})
                return []
            remember(p, offset, value, at)
            held.applied[p] = offset
            if not value.startswith(INTERNAL):
                cluster.observe(core.now)
            metrics.stage("partition", time.perf_counter() - started)
        metrics.inputs.inc()
        metrics.candidates.inc(len(out))
        sent = [encode(record) for record in out]
        if value.startswith(INTERNAL) and b'"tick"' in value[:40]:
            sent.append(encode(Watermark(p, core.now)))
        return sent

    @app.agent(inputs)
    async def partitions(stream: StreamT[bytes]) -> AsyncIterator[None]:
        # One event at a time: Faust's take_events left a last batch uncommitted (lag on
        # the real-broker tests), so batching waits for a consumer that commits it.
        event: EventT[bytes]
        async for event in stream.events():
            msg = event.message
            for value in take(msg.partition, msg.offset, msg.value or b"", arrival(msg.headers)):
                await candidates.send(key=CLUSTER, value=value)
            yield None

    # ---- guard: candidates -> commands ------------------------------------------------
    def guard_core() -> GuardCore:
        core = guard_box.get("cluster")
        if core is None:
            rows = dict(guard_table.items())
            core = GuardCore.from_rows(policy, streams.inputs.partitions, rows, verdicts)
            guard_box["cluster"] = core
        return core

    @app.agent(candidates)
    async def guard(stream: StreamT[bytes]) -> AsyncIterator[None]:
        event: EventT[bytes]
        async for event in stream.events():
            core = guard_core()
            started = time.perf_counter()
            record = parse_guard_record(event.message.value or b"{}")
            for released in core.take(record):
                await _settled(released)
            # Only the rows that changed: the guard state when it did, the one watermark.
            for row, value in core.changed().items():
                guard_table[row] = value
            metrics.stage("guard", time.perf_counter() - started)
            yield None

    async def _settled(released: Released) -> None:
        result = released.result
        if result is None:
            pass  # learned cold starts, passed on below
        elif isinstance(result, Decision):
            log.info("decided", extra={"incident": result.incident, "action": result.action})
            await commands.send(key=result.incident.encode(), value=encode(result))
        else:
            d = result.decision
            log.info(
                "suppressed",
                extra={"incident": d.incident, "guardrail": result.guardrail, "why": result.reason,
                       "retry_at": result.retry_at, "decided_at": d.at},
            )  # fmt: skip
            if result.simulated:  # a dry run's "would have": told as serve tells it
                await commands.send(key=d.incident.encode(), value=would_have(result))
        feedback = released.feedback
        if feedback is None:
            return
        if isinstance(feedback, Learned):  # every other partition judges by it too
            value = feedback_record(feedback)
            for p in range(streams.inputs.partitions):
                if p != released.origin:
                    await inputs.send(key=LEARNED, value=value, partition=p)
            return
        d = feedback.decision
        key, value = f"{d.namespace}/{d.target}".encode(), feedback_record(feedback)
        if isinstance(feedback, GotThrough):  # every partition may hold pods of its workload
            for p in range(streams.inputs.partitions):
                await inputs.send(key=key, value=value, partition=p)
        else:  # look again: the decision's own partition
            await inputs.send(key=key, value=value, partition=released.origin)

    # ---- executor: commands -> the acting component (Argo, Slack) ---------------------
    install_acting(app, commands, streams.commands.partitions, executors, registry, metrics)

    # ---- ticks: every partition's clock moves on with the wall clock ------------------
    if streams.tick_s > 0:

        @app.timer(streams.tick_s)  # type: ignore[untyped-decorator]
        async def tick() -> None:
            now = cluster.now()
            mine = {
                tp.partition
                for tp in app.consumer.assignment()
                if tp.topic == inputs.get_topic_name()
            }
            for p in sorted(mine):
                await inputs.send(key=TICK.encode(), value=tick_record(now), partition=p)

    # ---- web: every worker answers on its own loopback port -----------------------------
    @app.page("/metrics")
    async def metrics_page(web: Any, request: Any) -> Any:
        # aiohttp refuses a charset in content_type: the exposition's header goes as is.
        return web.bytes(generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        crashed = [a.name for a in app.agents.values() if a.crash_reason is not None]
        ok = not crashed
        return web.json({"ok": ok, "crashed": crashed}, status=200 if ok else 503)

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        recovered = app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]
        ready = recovered and not app.rebalancing
        detail = "serving" if ready else ("rebalancing" if recovered else "recovering tables")
        return web.json({"ready": ready, "detail": detail}, status=200 if ready else 503)

    return app
