"""The ingest's watch: serve's list+watch of Pods, Events and workloads, onto the inputs topic.

`remediator ingest --namespaces ...` runs the loops serve runs (`sources.kube_watch`:
list, watch, resume, relist after a 410 or a gap, the probe of the API server's
resourceVersion), in documents mode: each watch line and each listed object goes to the
publisher as it came, cut by pod key as a webhook's body is; the partitions decode it.

What serve's driver does with the watch's state, the ingest says in the stream:
- A complete list (`Relisted`) goes to every partition as an internal record holding the
  UIDs of the objects sent to that partition (so it stays small as the fleet grows): a
  pod deleted while the watch was away leaves the partition's tracker.
- Every `word_s`, a tick to every partition carries the ingest's word on its Pod watches
  (`streams.core.tick_record`): why their picture may lag the API server's (relisting,
  short of the probed resourceVersion, a BOOKMARK overdue), or "" when current. Each
  partition stamps its candidates with it and the guard holds pod deletions on it
  (guard/watch_current.py); a partition that hears no word for a while holds too.
- A document the broker did not take: every watch relists (events may have been lost),
  and so says behind until the list is through.

Order: the watch threads hand documents to one queue and one task publishes them in
order; the word is queued after whatever the watches delivered before it was read, so a
partition hears "current" only after the relist's documents.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import msgspec
from kubernetes import client
from prometheus_client import CollectorRegistry, Counter

from remediator.inputs.records import Input, InputError, Relisted
from remediator.logfields import get_logger
from remediator.runtime.clock import Clock
from remediator.runtime.supervisor import Restarts, Supervisor
from remediator.sources.kube_watch import (
    KubeWatch,
    WatchSettings,
    WatchTarget,
    pods_behind,
    probe_forever,
)
from remediator.sources.metrics import SourceMetrics
from remediator.streams.core import relisted_record, tick_record
from remediator.streams.ingest import Publisher
from remediator.streams.keys import BROADCAST, partition_of, split
from remediator.streams.pods import WORD, relisted_key

log = get_logger("remediator.ingest")

WORD_S = 1.0  # how often the partitions hear how the watch stands

# (what, the watch's target, payload, uid): "doc" (bytes), "listed" (Relisted), "word" (str)
_Item = tuple[str, WatchTarget | None, Any, str | None]


class IngestWatch:
    """The watches of `targets`, their documents onto the inputs topic through `publisher`."""

    def __init__(
        self,
        publisher: Publisher,
        api: client.ApiClient,
        targets: list[WatchTarget],
        metrics: SourceMetrics,
        registry: CollectorRegistry,
        settings: WatchSettings | None = None,
        word_s: float = WORD_S,
    ) -> None:
        self.publisher = publisher
        self.metrics = metrics
        self.settings = settings or WatchSettings()
        self.word_s = word_s
        self.watches = [
            KubeWatch(api, t, self._relisted(t), metrics, self.settings, self._documents(t))
            for t in targets
        ]
        self.restarts = Counter(
            "remediator_task_restarts_total",
            "Ingest tasks (a watch, the probe, the publishing) restarted after they failed.",
            ["task"],
            registry=registry,
        )
        self.stopping = asyncio.Event()  # set when supervision gives up: the ingest exits
        self._queue: asyncio.Queue[_Item] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listing: dict[str, dict[int, set[str]]] = {}  # label -> partition -> UIDs
        self._tasks: list[asyncio.Task[None]] = []
        self._awaited: set[asyncio.Future[None]] = set()
        self.supervisor: Supervisor | None = None

    # ---- from the watch threads ---------------------------------------------------------
    def _documents(self, target: WatchTarget) -> Callable[[bytes, str | None], None]:
        return lambda raw, uid: self._put(("doc", target, raw, uid))

    def _relisted(self, target: WatchTarget) -> Callable[[list[Input]], None]:
        def deliver(inputs: list[Input]) -> None:
            for item in inputs:
                if isinstance(item, Relisted):
                    self._put(("listed", target, item, None))

        return deliver

    def _put(self, item: _Item) -> None:
        loop = self._loop
        if loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed first: the ingest stopped
            loop.call_soon_threadsafe(self._queue.put_nowait, item)

    # ---- running --------------------------------------------------------------------------
    def start(self, clock: Clock) -> None:
        self._loop = asyncio.get_running_loop()
        sup = self.supervisor = Supervisor(clock, Restarts(), self.restarts, self.stopping)
        tasks = [("publish", self._publish), ("words", lambda: self._words(clock))]
        tasks.append(("watch-probe", lambda: probe_forever(self.watches, self.settings.probe_s,
                                                           clock.sleep)))  # fmt: skip
        tasks += [(f"watch-{w.target.label}", w.supervised) for w in self.watches]
        for name, make in tasks:
            self._tasks.append(asyncio.create_task(sup.run(name, make), name=name))

    async def stop(self) -> None:
        for w in self.watches:
            w.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def ready(self) -> tuple[bool, str]:
        waiting = [w.target.label for w in self.watches if not w.synced.is_set()]
        if waiting:
            return False, f"watches not synced: {', '.join(waiting[:5])}"
        failed = self.supervisor.status() if self.supervisor else None
        if failed:
            return False, failed
        return True, f"{len(self.watches)} watches synced"

    async def _words(self, clock: Clock) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await clock.sleep(self.word_s)
            why = pods_behind(self.watches, self.metrics) or ""
            # call_soon: after whatever the watch threads queued before it was read.
            loop.call_soon(self._queue.put_nowait, ("word", None, why, None))

    async def _publish(self) -> None:
        try:
            await self._publish_forever()
        except Exception:
            # What was taken from the queue may not have gone out: the lists send it again.
            for w in self.watches:
                w.relist("the ingest's publishing failed")
            raise

    async def _publish_forever(self) -> None:
        while True:
            what, target, payload, uid = await self._queue.get()
            if what == "doc":
                assert target is not None
                await self._document(target, payload, uid)
            elif what == "listed":
                assert target is not None
                await self._listed(target, payload)
            else:
                await self._word(payload)

    # ---- onto the topic --------------------------------------------------------------------
    async def _document(self, target: WatchTarget, raw: bytes, uid: str | None) -> None:
        try:
            records = split(raw)
        except InputError as exc:
            self.metrics.input_errors.labels("kube").inc()
            log.warning("watch input refused", extra={"watch": target.label, "error": str(exc)})
            return
        if not records:
            return
        self.metrics.inputs.labels("kube").inc(sum(len(r.inputs) for r in records))
        if uid is not None:  # a listed object: each partition it went to has it
            listing = self._listing.setdefault(target.label, {})
            for r in records:
                for p in self._partitions(r.key):
                    listing.setdefault(p, set()).add(uid)
        _, acks = await self.publisher.enqueue_records(records)
        self._check(acks)

    async def _listed(self, target: WatchTarget, item: Relisted) -> None:
        """Each partition hears of the list's objects it was sent (of an attempt cut short,
        only those the complete list still held)."""
        listing = self._listing.pop(target.label, {})
        if item.at is not None:
            self.publisher.cluster.observe(item.at)
        n = self.publisher.cfg.inputs.partitions
        sent = [frozenset(listing.get(p, set()) & item.uids) for p in range(n)]
        values = [relisted_record(msgspec.structs.replace(item, uids=uids)) for uids in sent]
        key = relisted_key(item.kind, item.namespace, item.selector)
        self._check(await self.publisher.enqueue_internal(key, values))

    async def _word(self, why: str) -> None:
        cluster = self.publisher.cluster
        if not cluster.known:  # no time to say it at before the first list
            return
        value = tick_record(cluster.now(), why)
        n = self.publisher.cfg.inputs.partitions
        self._check(await self.publisher.enqueue_internal(WORD, [value] * n))

    def _partitions(self, key: str) -> range | tuple[int]:
        n = self.publisher.cfg.inputs.partitions
        return range(n) if key == BROADCAST else (partition_of(key, n),)

    def _check(self, acks: list[asyncio.Future[None]]) -> None:
        for ack in acks:
            if ack not in self._awaited:  # an envelope holds many documents: heard once
                self._awaited.add(ack)
                ack.add_done_callback(self._acked)

    def _acked(self, ack: asyncio.Future[None]) -> None:
        self._awaited.discard(ack)
        if ack.cancelled() or ack.exception() is None:
            return
        why = f"the broker did not take a watch document: {ack.exception()!r}"
        for w in self.watches:  # events may be lost: the lists send the present again
            w.relist(why)
