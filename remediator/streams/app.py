"""`remediator worker`: the core as a Faust app on Kafka.

Three agents, one per topic (see `streams.core` for what each decides):

  partitions  inputs topic (N partitions, keyed by pod)  -> candidates topic (key "cluster")
  guard       candidates topic (1 partition)             -> commands topic (key incident)
                                                            + feedback to the partitions:
                                                            in process where this worker
                                                            holds them, else by the inputs
                                                            topic
  executor    commands topic                             -> the acting component's rows:
                                                            Argo (or the dry-run recorder),
                                                            Slack (streams/executor.py)

With --guard-partitions M above 1 the guard is split by workload (streams/tiers.py): the
guard agent holds a first tier per candidates partition (M, by workload), and a fourth
agent, settle, the second tier over the admitted topic (1 partition). Records between the
tiers go to their topics; where this worker holds the other tier, it takes them at once too
(`onward`).

State lives in Faust Tables with changelog topics, so a worker that takes over a
partition takes its history with it:

  pods   "<partition>|<first offset>" -> a batch's input records (`streams.pods`); the
         partition's timelines, incidents and timers are rebuilt from them in offset
         order (the same core, fed the same inputs in the same order); a deleted pod's
         records go once its partition forgot it
  guard  one row per key: "state" (the guard state, written when it changed),
         "marks" (the clock, every watermark, how far it read the candidates topic),
         "learned|<model>" (the cluster's cold starts); a waiting candidate has no row:
         a restored guard reads the topic again from the oldest (`read_up_to`)

Agents take their topics in batches of what is waiting (`streams.batches`): a batch
costs one pods row per partition, one record to the guard, and one feedback row (a
partition held here) or record (held elsewhere) per partition told something.

Every worker exports every metric on its /metrics: the cold-start histograms of the
partitions it holds (one set per worker), the guard's decisions and suppressions, and
its own counters.

Delivery is at least once: the producer is flushed before offsets are committed, a
record redelivered after a crash is recognised by its offset, and the executor is
idempotent (the workflow name is derived from the incident: a replayed command
submits nothing new); the acting component's rows live in a table of their own.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import faust
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from faust.transport.consumer import Consumer
from faust.types import TP, EventT, StreamT
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from remediator.contract.codec import encode
from remediator.contract.decision import Decision
from remediator.contract.records import Feedback, GotThrough, Settled
from remediator.core.decider import node_pace_gauges, timeline_metrics, tracker_gauges
from remediator.core.guard import FOREIGN_RECORDS, Guard, HedgeBudgetGauges, Verdicts
from remediator.inputs.records import InputError
from remediator.policy_file import PolicyFile
from remediator.runtime.clock import ClusterTime, SystemClock
from remediator.streams.batches import waiting, written_under
from remediator.streams.config import StreamsConfig
from remediator.streams.core import (
    ENVELOPE,
    FEEDBACK_KEY,
    INTERNAL,
    MARKS,
    AdmittedRecord,
    Candidate,
    GuardCore,
    GuardRecord,
    Learned,
    PartitionCore,
    Released,
    Watermark,
    feedback_runs,
    feedback_value,
    guard_batch,
    judged_key,
    learned_samples,
    parse_guard_records,
    thin_broadcast,
    thin_feedback,
    tick_record,
    unpack,
)
from remediator.streams.executor import Executors, install_acting, would_have
from remediator.streams.keys import BROADCAST, NOW_HEADER, command_key
from remediator.streams.kill_switch import SwitchPoll
from remediator.streams.metrics import WorkerMetrics
from remediator.streams.pods import TICK, PartitionRows
from remediator.streams.progress import QUIET_S, Progress
from remediator.streams.recovery_watch import RecoveryWatch
from remediator.streams.tiers import FirstTier, SecondTier, route, tier_of
from remediator.streams.transport import ShortWaitTransport

log = logging.getLogger("remediator.worker")

CLUSTER = b"cluster"
GUARD_BATCH = 200  # records in one candidates-topic record, at most
# A restored guard reads its waiting candidates back within this, or its agent fails
# (/healthz: a liveness probe restarts the worker, which reads them again).
REPLAY_TIMEOUT_S = 60.0
# What a guard tier said, and which first tiers said it (their watermarks go on with it).
Passed = tuple[list[Released], Mapping[int, GuardCore]]
SECOND = "cluster"  # the second tier, beside the first tiers' candidates partitions
Tier = int | str  # a first tier (its candidates partition) or SECOND
FEEDBACK = FEEDBACK_KEY.encode()  # the key of feedback records (the partition is explicit)
LEARNED = b"\x00learned"  # (an older worker's key of relayed cold starts)


@dataclass
class Partitions:
    """This worker's cores, one per input partition it holds, rebuilt on first use."""

    config: PolicyFile
    count: int
    cores: dict[int, PartitionCore] = field(default_factory=dict)
    rows: dict[int, PartitionRows] = field(default_factory=dict)  # its rows in the table
    applied: dict[int, int] = field(default_factory=dict)  # highest offset in the core
    # The next free place at that offset: feedback applied here goes after its documents.
    after: dict[int, int] = field(default_factory=dict)
    # The partition's last event: its rows are written under it (the changelog partition).
    events: dict[int, EventT[bytes]] = field(default_factory=dict)

    def drop(self, partitions: set[int]) -> None:
        for p in partitions:
            for held in (self.cores, self.rows, self.applied, self.after, self.events):
                held.pop(p, None)

    def here(self, p: int) -> bool:
        """This worker holds partition `p` and its core is built: feedback for it can be
        applied in this process."""
        return p in self.cores and p in self.rows and p in self.events and p in self.applied


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


Doc = tuple[bytes, str, float | None]  # a document, its partition key, when it arrived


def documents(msg: Any, metrics: WorkerMetrics) -> list[Doc]:
    """An input-topic record's documents, in order: an envelope's (the ingest's), or the
    record itself (a worker's tick, the guard's feedback, an older ingest's document)."""
    value = msg.value or b""
    if not value.startswith(ENVELOPE):
        return [(value, (msg.key or b"").decode(), arrival(msg.headers))]
    try:
        return [(bytes(d.raw), d.key, d.at) for d in unpack(value)]
    except InputError as exc:
        metrics.input_errors.inc()
        log.warning(
            "bad envelope skipped",
            extra={"partition": msg.partition, "offset": msg.offset, "error": str(exc)},
        )
        return []


def _is_tick(value: bytes) -> bool:
    return value.startswith(INTERNAL) and b'"tick"' in value[:40]


def _samples(out: Iterable[Candidate | Learned]) -> Iterator[tuple[str, str, float]]:
    for record in out:
        if isinstance(record, Learned):
            yield from record.samples


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
        broker_commit_interval=streams.commit_interval_s,
        # A batch's sends leave together: a few produce requests per batch, not one each.
        producer_linger=streams.linger_s,
        # A worker that dies (SIGKILL, node loss) is noticed after this: keep it short.
        broker_session_timeout=streams.session_timeout_s,
        broker_heartbeat_interval=min(3.0, streams.session_timeout_s / 3),
        autodiscover=False,
        topic_disable_leader=True,  # one more topic Faust would create with its own count
        table_standby_replicas=streams.standby_replicas,
    )
    app.transport = ShortWaitTransport(app, streams.fetch_wait_s)  # before any topic
    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes}
    raw |= {"key_serializer": "raw", "value_serializer": "raw"}
    inputs = app.topic(streams.inputs.name, partitions=streams.inputs.partitions, **raw)
    guards = streams.candidates.partitions  # 1: one guard; more: split by workload
    candidates = app.topic(streams.candidates.name, partitions=guards, **raw)
    commands = app.topic(streams.commands.name, partitions=streams.commands.partitions, **raw)
    as_json: faust.Schema[Any, Any] = faust.Schema(key_serializer="json", value_serializer="json")
    pods = app.Table("pods", partitions=streams.inputs.partitions, schema=as_json)
    guard_table = app.Table("guard", partitions=guards, schema=as_json)
    metrics = WorkerMetrics(registry)
    # every partition this worker holds observes here
    observed = timeline_metrics(registry, time.time)
    verdicts = Verdicts(registry)  # and its guard counts here
    held = Partitions(policy, streams.inputs.partitions)
    window = policy.rules.stuck_pod.adaptive.window  # the history a pod is judged by
    thinning = {FEEDBACK_KEY: thin_feedback, BROADCAST: thin_broadcast}
    # The tracker's gauges (pods per phase, time in phase), summed over those partitions.
    registry.register(tracker_gauges(lambda: [core.decider for core in held.cores.values()]))
    registry.register(node_pace_gauges(lambda: [core.decider for core in held.cores.values()]))
    # serve's gauge, per worker: 1 while any partition it holds holds pod deletions (its
    # ingest's word on the watch says behind, or has not come: streams/ingest_watch.py).
    Gauge("remediator_behind", "1 while pod deletions are held: the watch's picture may lag "
          "the API server's (the ingest says so, or has said nothing for --watch-silent).",
          registry=registry).set_function(
        lambda: float(any(core.behind for core in held.cores.values())))  # fmt: skip
    # Ticks move partition clocks on the cluster's time as the inputs show it, carried on
    # by the monotonic clock, never by the local wall clock (see runtime.clock.ClusterTime).
    cluster = ClusterTime(SystemClock())
    guard_box: dict[int, GuardCore] = {}  # candidates partition -> its guard (first tier)
    # The last offset each partition delivered to an agent: what Faust fetched and
    # dropped is sought back (`rewind_stuck`, streams/progress.py).
    progress: Progress[TP] = Progress(time.monotonic)
    second_box: dict[str, SecondTier] = {}  # the cluster tier, where this worker holds it

    def budget_guards() -> list[tuple[Guard, float]]:
        """The guard holding the hedge budget, if this worker holds it, at its clock: the
        cluster tier where the guard is split, else the one guard."""
        cores = list(second_box.values()) if streams.tiers else list(guard_box.values())
        return [(core.guard, core.clock) for core in cores]

    registry.register(HedgeBudgetGauges(budget_guards))

    @app.on_rebalance_complete.connect  # type: ignore[arg-type]
    async def hold_fetched(sender: Any, **_: Any) -> None:
        """Faust, its tables recovered, resumes the stream partitions and seeks them to
        their committed offsets, and only then resumes flow control, which clears every
        stream's buffer: a record fetched in between was dropped, never acked and never
        fetched again (a taken-over partition kept its lag for good). Suspended until
        that resume, a record fetched in between waits for it instead."""
        app.flow_control.suspend()

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(sender: Any, revoked: set[TP], **_: Any) -> None:
        progress.forget(revoked)
        held.drop({tp.partition for tp in revoked if tp.topic == streams.inputs.name})
        for tp in revoked:
            if tp.topic == streams.candidates.name:
                guard_box.pop(tp.partition, None)
                unanswered.pop(tp.partition, None)
                tier_events.pop(tp.partition, None)
                told.pop(tp.partition, None)
            elif tp.topic == streams.admitted.name:
                second_box.clear()
                tier_events.pop(SECOND, None)

    # ---- partitions: inputs -> candidates ----------------------------------------------
    def rebuild(p: int, first: int) -> tuple[PartitionCore, list[Candidate | Learned]]:
        """The partition's core from its table rows; candidates of records at or after
        `first` (the first offset this worker will be given) are sent again, since
        they may not have left the dead worker."""
        # What the worker before had observed is in its /metrics: not counted twice here.
        core = PartitionCore(policy, p, streams.inputs.partitions, metrics=timeline_metrics(),
                             watched=streams.ingest_watches,
                             watch_silent_s=streams.watch_silent_s)  # fmt: skip
        rows = held.rows[p] = PartitionRows(pods, p)
        entries = rows.replay()
        resend: list[Candidate | Learned] = []
        for entry in entries:
            if entry.samples:  # of a pod pruned since: learned again, in its place
                core.decider.learn(Learned(entry.offset, p, entry.samples))
                continue
            if entry.offset >= first:
                core.decider.metrics = observed
            out = core.feed(entry.raw.encode(), entry.at, (entry.offset, entry.index))
            rows.taught(entry.key, entry.offset, _samples(out))
            if entry.offset >= first:
                resend.extend(out)
        core.decider.metrics = observed
        last = max((e.offset for e in entries), default=-1)
        held.applied[p] = last
        held.after[p] = 1 + max((e.index for e in entries if e.offset == last and not e.samples),
                                default=-1)  # fmt: skip
        metrics.rebuilds.inc()
        log.info("partition rebuilt", extra={"partition": p, "records": len(entries)})
        return core, resend

    def write_rows(last: dict[int, EventT[bytes]]) -> None:
        """Each partition's batch as one row; then the rows of pods its core forgot go."""
        for p, event in last.items():
            rows, core = held.rows.get(p), held.cores.get(p)
            if rows is None or core is None:
                continue
            with written_under(event):  # the changelog partition is the event's
                rows.flush()
                gone = core.take_gone()
                if gone:
                    rows.prune(gone, event.message.offset)
                    metrics.pruned.inc(len(gone))
                if rows.unfolded >= streams.fold_after:
                    rows.fold(window, learned_samples, judged_key, thinning)
                    metrics.folds.inc()

    def take(p: int, offset: int, docs: Sequence[Doc]) -> list[GuardRecord]:
        """One input-topic record into its partition's core, its documents in order (an
        envelope's, or the record itself): what goes to the guard."""
        core = held.cores.get(p)
        out: list[GuardRecord] = []
        if core is None:
            core, resend = rebuild(p, offset)
            out.extend(resend)
            held.cores[p] = core
        metrics.inputs.inc(len(docs))
        if offset <= held.applied.get(p, -1):
            # Already in the table (redelivered after a crash): its candidates were resent
            # above; a tick's watermark goes again.
            if any(_is_tick(value) for value, _, _ in docs):
                out.append(Watermark(p, core.now))
            metrics.candidates.inc(len(out))
            return out
        rows = held.rows[p]
        for index, (value, name, at) in enumerate(docs):
            try:
                fed = core.feed(value, at, (offset, index))
            except InputError as exc:
                metrics.input_errors.inc()
                log.warning("bad input skipped", extra={"partition": p, "error": str(exc)})
                continue
            out.extend(fed)
            rows.add(offset, value.decode(), name, at, index)
            rows.taught(name, offset, _samples(fed))
            if not value.startswith(INTERNAL):
                cluster.observe(core.now)
            elif _is_tick(value):
                out.append(Watermark(p, core.now))
        held.applied[p] = offset
        held.after[p] = len(docs)
        metrics.candidates.inc(len(out))
        return out

    @app.agent(inputs)
    async def partitions(stream: StreamT[bytes]) -> AsyncIterator[None]:
        # In batches: the batch's rows are written and what it sends the guard goes out
        # (one record) before the next; Faust acks the batch's events when the next is
        # asked for, and commits them with the producer flushed.
        batch: Sequence[EventT[bytes]]
        async for batch in waiting(stream, streams.batch, progress, streams.batch_linger_s):
            started = time.perf_counter()
            out: list[GuardRecord] = []
            last: dict[int, EventT[bytes]] = {}
            for event in batch:
                msg = event.message
                last[msg.partition] = event
                out.extend(take(msg.partition, msg.offset, documents(msg, metrics)))
            held.events.update(last)
            write_rows(last)
            metrics.stage("partition", time.perf_counter() - started)
            await to_guard(out)
            yield None

    async def to_guard(out: list[GuardRecord]) -> None:
        """To the guard: to its workload's first tier where the guard is split."""
        for m, records in route(out, guards).items():
            for at in range(0, len(records), GUARD_BATCH):  # a rebuild may resend many
                value = guard_batch(records[at : at + GUARD_BATCH])
                await candidates.send(key=CLUSTER, value=value, partition=m)

    # ---- guard: candidates -> commands ------------------------------------------------
    switch = SwitchPoll(streams.kill_switch_file, registry) if streams.kill_switch_file else None

    unanswered: dict[int, list[Released]] = {}  # a restored first tier's, to send again

    def guard_core(m: int) -> GuardCore:
        core = guard_box.get(m)
        if core is None:
            rows = table_rows(guard_table, m)
            n = streams.inputs.partitions
            if streams.tiers:
                core = FirstTier.from_rows(policy, n, rows, verdicts, index=m)
                unanswered[m] = core.unanswered()  # sent again with its first batch
            else:
                core = GuardCore.from_rows(policy, n, rows, verdicts)
            warn_foreign(core)
            guard_box[m] = core
        return core

    def warn_foreign(core: GuardCore) -> None:
        if foreign := core.foreign:
            log.warning(FOREIGN_RECORDS, extra={"records": list(foreign)})

    def table_rows(table: Any, m: int) -> dict[str, Any]:
        """A guard's rows: the table's (one guard), or those under its partition's prefix."""
        prefix = guard_prefix(m)
        return {k[len(prefix) :]: v for k, v in table.items() if k.startswith(prefix)}

    def guard_prefix(m: int) -> str:
        """The guard table's rows of candidates partition `m`'s guard are under this."""
        return f"{m}|" if guards > 1 else ""

    def write_guard_rows(core: GuardCore, table: Any, prefix: str, event: EventT[bytes]) -> None:
        """Only the rows that changed: the guard state when it did, the learned histories,
        the marks (clock, watermarks, how far it read) last: the changelog partition is
        the event's, so marks on the broker means the rest is."""
        with written_under(event):
            changed = core.changed()
            for row in sorted(changed, key=lambda r: r == MARKS):
                if (value := changed[row]) is not None:
                    table[prefix + row] = value
                elif prefix + row in table:
                    del table[prefix + row]  # a tombstone: the changelog forgets it

    async def read_again(tp: TP, start: int, stop: int) -> list[tuple[int, bytes]]:
        """The candidates-topic records [start, stop), read apart from Faust's consumer
        (seeking that one back races its fetcher, which drops what is below the offset
        it last handed on)."""
        reader = AIOKafkaConsumer(bootstrap_servers=streams.bootstrap, enable_auto_commit=False,
                                  auto_offset_reset="earliest",
                                  client_id=f"{streams.group}-guard-replay")  # fmt: skip
        await reader.start()
        try:
            part = TopicPartition(tp.topic, tp.partition)
            reader.assign([part])
            reader.seek(part, start)
            out: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + REPLAY_TIMEOUT_S
            seen = start - 1  # the highest offset read, kept or not: offsets may skip
            while seen < stop - 1:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"candidates {start}..{stop - 1} not read back in time")
                for r in (await reader.getmany(part, timeout_ms=1000)).get(part, []):
                    seen = max(seen, r.offset)
                    if r.offset < stop:
                        out.append((r.offset, r.value or b"[]"))
            return out
        finally:
            await reader.stop()

    async def read_up_to(core: GuardCore, event: EventT[bytes]) -> list[Released]:
        """What the guard never took before the record Faust gives it, read and taken
        first (`GuardCore.missed_before`): a restored guard's waiting candidates (the
        topic keeps them, no row each) up to the first record Faust gives it (after its
        committed offset, which moved on as batches were acked), or a record Faust
        dropped around a rebalance."""
        msg = event.message
        start = core.missed_before(msg.offset)
        if start is None:
            return []
        records = await read_again(msg.tp, start, msg.offset)
        metrics.rewinds.inc()
        log.info("guard records read again: the guard restored, or records not given it",
                 extra={"topic": msg.tp.topic, "from": start, "to": msg.offset - 1,
                        "records": len(records)})  # fmt: skip
        released: list[Released] = []
        for offset, value in records:
            records_at = parse_guard_records(value, topic_kind(msg.tp.topic))
            released.extend(core.take_batch(records_at, offset))
        return released

    def topic_kind(name: str) -> str:
        return "admitted" if name == streams.admitted.name else "candidates"

    @app.agent(candidates)
    async def guard(stream: StreamT[bytes]) -> AsyncIterator[None]:
        batch: Sequence[EventT[bytes]]
        async for batch in waiting(stream, streams.batch, progress, streams.batch_linger_s):
            started = time.perf_counter()
            released: list[Released] = []
            last: dict[int, tuple[GuardCore, EventT[bytes]]] = {}
            for event in batch:
                m = event.message.partition
                core = guard_core(m)
                released.extend(unanswered.pop(m, ()))
                if m not in last and switch is not None:  # (the file's, not the rows')
                    core.set_kill_switch(*switch.now())
                last[m] = (core, event)
                tier_events[m] = event
                released.extend(await take_guard_event(core, event))
            took = time.perf_counter() - started
            await _settled(released)
            touched = await onward(released, {m: core for m, (core, _) in last.items()})
            started = time.perf_counter()
            write_tier_rows([*last, *touched])
            metrics.stage("guard", took + time.perf_counter() - started)
            yield None

    async def take_guard_event(core: GuardCore, event: EventT[bytes]) -> list[Released]:
        released = await read_up_to(core, event)
        msg = event.message
        if core.has_taken(msg.offset):
            return released  # passed to it in process, or released before a restore
        records = parse_guard_records(msg.value or b"[]", topic_kind(msg.tp.topic))
        return released + core.take_batch(records, msg.offset)

    # ---- the guard split by workload: the first tiers' word to the second, and back ----
    told: dict[int, float] = {}  # the watermark each first tier here sent last

    tier_producer: list[AIOKafkaProducer] = []  # one, made at the first need (send_up)
    tier_lock = asyncio.Lock()
    # The latest event each tier here took: the changelog partition of rows it writes
    # outside its agent (a candidates partition's first tier; the second).
    tier_events: dict[Tier, EventT[bytes]] = {}

    async def onward(released: list[Released], tiers: Mapping[int, GuardCore]) -> set[Tier]:
        """What a tier passes the other: the first's admitted candidates, the hedge
        budget's news and its watermark (how far it let everything on) to the admitted
        topic, in that order; the second's word to each workload's first tier. Each goes
        to its topic, the record a restart reads; where the other tier is here it takes
        it at once too, and what that says passes on the same way (a workload's next
        decision waits for its word: no broker round trip on each). The tiers here that
        took something: their rows are the caller's to write, once, after all this."""
        touched: set[Tier] = set()
        if not streams.tiers:
            return touched
        work: deque[Passed] = deque([(released, tiers)])
        while work:
            said, by = work.popleft()
            for m, words in words_down(said).items():
                await candidates.send(key=CLUSTER, value=guard_batch(words), partition=m)
                if passed := await pass_down(m, words):
                    touched.add(m)
                    work.extend(passed)
            up = words_up(said, by)
            if up and (passed := await pass_up(up, await send_up(up))):
                touched.add(SECOND)
                work.extend(passed)
        return touched

    def write_tier_rows(tiers: Iterable[Tier]) -> None:
        """The rows of the tiers here that took something, once per batch and after what
        they let out went to the producer: rows on the broker (how far a tier read) with
        its commands not would lose those commands, as the restored tier skips what it
        read; commands out and rows not only repeat them, which the acting component
        carries once. A tier revoked meanwhile writes nothing: its next owner reads its
        records again."""
        for tier in dict.fromkeys(tiers):
            event = tier_events.get(tier)
            if tier == SECOND:
                second = second_box.get(SECOND)
                if second is not None and event is not None:
                    write_guard_rows(second, settle_table, "", event)
            elif isinstance(tier, int) and event is not None and tier in guard_box:
                write_guard_rows(guard_box[tier], guard_table, guard_prefix(tier), event)

    def words_down(released: list[Released]) -> dict[int, list[GuardRecord]]:
        """The second tier's words, by first tier."""
        down: dict[int, list[GuardRecord]] = {}
        for one in released:
            if isinstance(one.onward, Settled):
                down.setdefault(tier_of(one.onward.workload, guards), []).append(one.onward)
        return down

    def words_up(released: list[Released], tiers: Mapping[int, GuardCore]) -> list[AdmittedRecord]:
        """The first tiers' records for the second: what they let on, then how far."""
        up: list[AdmittedRecord] = []
        for one in released:
            if one.onward is not None and not isinstance(one.onward, Settled):
                up.append(one.onward)
        for m, core in tiers.items():
            if isinstance(core, FirstTier) and core.settles_to > told.get(m, -math.inf):
                told[m] = core.settles_to
                up.append(Watermark(m, core.settles_to))
        return up

    async def pass_down(m: int, words: list[GuardRecord]) -> list[Passed]:
        """The second tier's words, taken by their first tier if it is here. (Its copy
        from the topic then answers nothing: `Settled` names the admission it answers.)"""
        core, event = guard_box.get(m), tier_events.get(m)
        if core is None or event is None:
            metrics.tier_words.labels("topic").inc()
            return []
        metrics.tier_words.labels("process").inc()
        said = core.take_batch(words)
        await _settled(said)
        return [(said, {m: core})]

    async def send_up(up: list[AdmittedRecord]) -> int:
        """A first tier's records to the admitted topic, through a producer of their own
        that sends at once (the worker's lingers 5 ms to fill a request: a workload's
        decisions follow each other one acknowledgement apart), acknowledged before this
        returns (Faust flushes only its own producer before it commits the batch that
        made them); their offset."""
        async with tier_lock:
            if not tier_producer:
                producer = AIOKafkaProducer(
                    bootstrap_servers=streams.bootstrap, acks="all", linger_ms=0,
                    enable_idempotence=True,  # a retried send is written once
                    client_id=f"{streams.group}-tiers",
                )  # fmt: skip
                await producer.start()
                tier_producer.append(producer)
        topic, value = streams.admitted.name, guard_batch(up)
        meta = await tier_producer[0].send_and_wait(topic, value, CLUSTER, partition=0)
        return int(meta.offset)

    async def pass_up(up: list[AdmittedRecord], offset: int) -> list[Passed]:
        """A first tier's records, taken by the second if it is here, at their offset
        (the broker has them), if nothing is before them to take first. (Its copy from
        the topic is then taken already: `GuardCore.has_taken`.)"""
        core, event = second_box.get(SECOND), tier_events.get(SECOND)
        if core is None or event is None or offset != core.read:
            metrics.tier_words.labels("topic").inc()
            return []
        metrics.tier_words.labels("process").inc()
        said = core.take_batch(up, offset)
        await _settled(said)
        return [(said, {})]

    if streams.tiers:
        admitted = app.topic(streams.admitted.name, partitions=1, **raw)
        settle_table = app.Table("settle", partitions=1, schema=as_json)

        def second_core() -> SecondTier:
            core = second_box.get(SECOND)
            if core is None:
                rows = dict(settle_table.items())
                core = SecondTier.from_rows(policy, guards, rows, verdicts)
                warn_foreign(core)
                second_box[SECOND] = core
            return core

        @app.agent(admitted)
        async def settle(stream: StreamT[bytes]) -> AsyncIterator[None]:
            batch: Sequence[EventT[bytes]]
            async for batch in waiting(stream, streams.batch, progress, streams.batch_linger_s):
                started, core = time.perf_counter(), second_core()
                released: list[Released] = []
                for event in batch:
                    released.extend(await take_guard_event(core, event))
                tier_events[SECOND] = batch[-1]
                took = time.perf_counter() - started
                await _settled(released)
                touched = await onward(released, {})
                started = time.perf_counter()
                write_tier_rows([SECOND, *touched])
                metrics.stage("settle", took + time.perf_counter() - started)
                yield None

    async def _settled(released: list[Released]) -> None:
        # Feedback per partition, in order, one input-topic record each: what got through
        # to every partition (any may hold pods of its workload), a "not yet" to its own,
        # learned cold starts to every other one (each judges by the cluster's history).
        feedback: dict[int, list[Feedback | Learned]] = {}
        for one in released:
            result = one.result
            if result is None:
                pass  # learned cold starts, passed on below
            elif isinstance(result, Decision):
                log.info("decided", extra={"incident": result.incident, "action": result.action,
                                           "namespace": result.namespace,
                                           "pod": result.target})  # fmt: skip
                await commands.send(key=command_key(result), value=encode(result))
            else:
                d = result.decision
                log.info(
                    "suppressed",
                    extra={"incident": d.incident, "guardrail": result.guardrail,
                           "why": result.reason, "retry_at": result.retry_at,
                           "decided_at": d.at, "namespace": d.namespace, "pod": d.target},
                )  # fmt: skip
                if result.simulated:  # a dry run's "would have": told as serve tells it
                    await commands.send(key=command_key(d), value=would_have(result))
            record = one.feedback
            if record is None:
                continue
            if isinstance(record, Learned):
                to = [p for p in range(streams.inputs.partitions) if p != one.origin]
            elif isinstance(record, GotThrough):
                to = list(range(streams.inputs.partitions))
            else:
                to = [one.origin]
            for p in to:
                feedback.setdefault(p, []).append(record)
        fed: list[GuardRecord] = []
        for p, records in sorted(feedback.items()):
            runs = feedback_runs(records)
            if held.here(p):
                fed.extend(feed_here(p, runs))
                continue
            metrics.feedback.labels("topic").inc()
            await inputs.send(key=FEEDBACK, value=feedback_value(runs), partition=p)
        if fed:
            metrics.candidates.inc(len(fed))
            await to_guard(fed)

    def feed_here(p: int, runs: list[tuple[str, bytes]]) -> list[Candidate | Learned]:
        """A partition this worker holds takes its feedback at once, in this process, as
        `Session` does: no record to the inputs topic and back (a "not yet" is most of
        the guard's feedback). It is kept in the partition's rows after the documents it
        followed (the offset applied last, the next places there), each run under its key
        (`feedback_runs`), so a rebuild, here or by the next owner, feeds it in the same
        order; the row goes to the broker before the guard's batch is committed (the
        producer is flushed first)."""
        core, rows, event = held.cores[p], held.rows[p], held.events[p]
        offset = held.applied[p]
        out: list[Candidate | Learned] = []
        for key, value in runs:
            index = held.after[p]
            held.after[p] = index + 1
            fed = core.feed(value, source=(offset, index))
            rows.add(offset, value.decode(), key, None, index)
            rows.taught(key, offset, _samples(fed))
            out.extend(fed)
        with written_under(event):  # the changelog partition is the partition's
            rows.flush()
        metrics.feedback.labels("process").inc()
        return out

    # ---- executor: commands -> the acting component (Argo, Slack) ---------------------
    install_acting(app, commands, streams.commands.partitions, executors, registry, metrics,
                   streams.batch, progress)  # fmt: skip

    # ---- records fetched and dropped by Faust around a rebalance: sought back ----------
    ours = {t.name for t in streams.topics}

    def settled() -> bool:
        """No rebalance and no table restore under way (each seeks on its own)."""
        return not app.rebalancing and not app.tables.recovery.in_recovery  # type: ignore[attr-defined]

    @app.timer(1.0)  # type: ignore[untyped-decorator]
    async def rewind_stuck() -> None:
        if not settled():
            progress.rewound()  # quiet is counted from the end of the rebalance
            return
        consumer, generation = app.consumer, app.consumer_generation_id

        def moved() -> bool:  # a rebalance began while this awaited: it seeks, not this
            if settled() and app.consumer_generation_id == generation:
                return False
            progress.rewound()
            return True

        # Each partition's end as the last fetch saw it: no request (a look a second
        # must not queue behind the fetches and commits in the consumer's thread).
        try:
            ends = {tp: consumer.highwater(tp) for tp in consumer.assignment()
                    if tp.topic in ours}  # fmt: skip
        except AssertionError:  # aiokafka's: not assigned any more (a rebalance began)
            progress.rewound()
            return
        try:
            if unknown := progress.unknown(ends):
                progress.learn(await committed_offsets(unknown))
            if moved() or not (stuck := progress.stuck(ends)):
                return
            # Each back to the first record its agents never got (of one that got none
            # here: the group's committed offset, or the start where none is, the offset
            # reset being "earliest"). `seek` also moves Faust's read offset, below which
            # it drops what it fetches: only what was never delivered comes again.
            for tp, offset in stuck.items():
                await consumer.seek(tp, offset)
        except Exception as exc:  # the broker away, a partition gone: the next look retries
            log.warning("looking for stuck partitions failed", extra={"error": repr(exc)})
            progress.rewound()
            return
        progress.rewound()
        metrics.rewinds.inc(len(stuck))
        log.warning(
            "records waiting, none delivered: sought back to them",
            extra={"partitions": {f"{t.topic}[{t.partition}]": o
                                  for t, o in sorted(stuck.items())}},
        )  # fmt: skip

    admin: list[AIOKafkaAdminClient] = []  # one, made at the first need

    @app.on_before_shutdown.connect  # type: ignore[arg-type]
    async def close_clients(sender: Any, **_: Any) -> None:
        for client in admin:
            await client.close()
        admin.clear()
        for producer in tier_producer:
            await producer.stop()  # (what it holds is sent first)
        tier_producer.clear()

    async def committed_offsets(tps: list[TP]) -> dict[TP, int]:
        """The group's committed offsets of `tps` (0: none), from the broker."""
        if not admin:
            client = AIOKafkaAdminClient(bootstrap_servers=streams.bootstrap,
                                         client_id=f"{streams.group}-progress")  # fmt: skip
            await client.start()
            admin.append(client)
        asked = [TopicPartition(tp.topic, tp.partition) for tp in tps]
        got = await admin[0].list_consumer_group_offsets(streams.group, partitions=asked)
        return {tp: max(got[a].offset, 0) if a in got else 0
                for tp, a in zip(tps, asked, strict=True)}  # fmt: skip

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

    # ---- liveness: a table recovery that reads nothing for long is stalled --------------
    watch = RecoveryWatch(streams.recovery_stall_s)

    @app.timer(1.0)  # type: ignore[untyped-decorator]
    async def watch_recovery() -> None:
        recovery = app.tables.recovery  # type: ignore[attr-defined]
        now = time.monotonic()
        was = watch.stalled(now)
        watch.sample(recovery.active_remaining_total() if recovery.in_recovery else 0, now)
        if watch.seek_again(now, QUIET_S):
            # Where the restore stands, as Faust seeks at its start: a changelog record it
            # fetched and dropped is never fetched again otherwise (no offset is committed
            # for a changelog), and the restore waits for it for good.
            at = {tp: max(o, 0) for tp, o in recovery.active_offsets.items()
                  if tp in recovery.active_tps}  # fmt: skip
            log.warning("table restore reads nothing: its changelogs sought again",
                        extra={"partitions": {f"{tp.topic}[{tp.partition}]": o
                                              for tp, o in sorted(at.items())}})  # fmt: skip
            try:
                await cast(Consumer, app.consumer).seek_wait(at)
                metrics.rewinds.inc(len(at))
            except Exception as exc:  # a new rebalance, the broker away: Faust seeks again
                log.warning("seeking the changelogs again failed", extra={"error": repr(exc)})
        stalled = watch.stalled(now)
        if stalled is not None and was is None:  # once per stall
            log.error(
                "table recovery stalled: /healthz fails until it moves (a liveness probe"
                " restarts the worker; its partitions are restored from the changelogs)",
                extra={"remaining": stalled.remaining, "for_s": round(stalled.for_s, 1)},
            )

    @app.page("/healthz")
    async def healthz(web: Any, request: Any) -> Any:
        crashed = [a.name for a in app.agents.values() if a.crash_reason is not None]
        stalled = watch.stalled(time.monotonic())
        ok = not crashed and stalled is None
        body: dict[str, Any] = {"ok": ok, "crashed": crashed}
        if stalled is not None:
            body["recovery_stalled"] = {"remaining": stalled.remaining,
                                        "for_s": round(stalled.for_s, 1)}  # fmt: skip
        return web.json(body, status=200 if ok else 503)

    @app.page("/readyz")
    async def readyz(web: Any, request: Any) -> Any:
        recovered = app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]
        ready = recovered and not app.rebalancing
        detail = "serving" if ready else ("rebalancing" if recovered else "recovering tables")
        return web.json({"ready": ready, "detail": detail}, status=200 if ready else 503)

    return app
