"""List + watch Pods, Events and workloads, handing raw JSON bytes to the core's decoder.

No model deserialisation on the hot path: every call is made with
`_preload_content=False`, so the `kubernetes` client returns the urllib3 response and
each watch line goes, as bytes, to `remediator.inputs.decode`. One thread per
(kind, namespace): the client is synchronous, and a blocked read must not stall the loop.

Resilience: a stream the server ends normally is resumed from the last
resourceVersion it saw (BOOKMARKs included); a 410 Gone (in the stream or as the HTTP
status) relists; any other failure is logged, counted and retried with capped
exponential backoff, and then relists: events may have been lost, and a list is the
API server's present, so the watch is known to have caught up the moment it ends.
Nothing is dropped silently: a line the decoder refuses, or an event with no object
(metadata) in it, is logged and counted as an input error. serve runs each watch under
the runtime's supervisor (`supervised`): anything that kills the thread is restarted
with a relist. `stale` says when it has shown no sign of life for too long (/readyz
fails).

Behind (`behind`, sources/currency.py): a Pod watch that is relisting, has not reached
the resourceVersion a probe found the API server at (`probe`: a quorum list of one
item, every few seconds), or has sent no BOOKMARK when one was due, may hold an old
picture; the runtime holds pod deletions meanwhile. A probe the API server does not
answer, or a stream that does not reach it in time, is cut and relisted.

A relist replays every object as ADDED, then says the list is complete (`Relisted`,
with every UID it held and the API server's time of it): an object deleted while the
watch was gone is never seen as DELETED, so the core reconciles it from that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.inputs.decode import normalize
from remediator.inputs.records import Input, InputError, Relisted
from remediator.logfields import get_logger
from remediator.sources.currency import BOOKMARK_S, GRACE_S, Currency
from remediator.sources.kube_client import server_time
from remediator.sources.metrics import SourceMetrics

log = get_logger(__name__)

Deliver = Callable[[list[Input]], None]  # must be safe to call from a worker thread
# A document as it came (a watch line, or one list item as a list of one) and the UID of
# the object in it where it is a list's: for a runtime that decodes elsewhere (the Kafka
# ingest publishes documents). Called from the watch's thread, like `Deliver`.
Documents = Callable[[bytes, str | None], None]

KINDS = ("Pod", "Event", "Deployment", "StatefulSet", "DaemonSet")
_LIST_PAGE = 500


class Gone(Exception):
    """410: the resourceVersion is too old; relist."""


@dataclass(frozen=True, slots=True)
class WatchTarget:
    kind: str  # one of KINDS
    namespace: str
    field_selector: str | None = None  # e.g. metadata.name=gpu-warmup (RBAC by name)
    label_selector: str | None = None  # kubectl coldstart's -l / a workload's selector

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.namespace}"


@dataclass(frozen=True, slots=True)
class WatchSettings:
    timeout_s: int = 300  # server-side timeoutSeconds of one watch request
    read_timeout_s: float = 330.0  # client side: a silent connection is dead after this
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    # A watch that has shown no sign of life (a list, a stream opened, an event, a BOOKMARK)
    # for this long is stale: /readyz fails. The API server sends a BOOKMARK about once a
    # minute to a watch that asks for them, and ends each request after timeout_s.
    stale_after_s: float = 90.0
    # Behind (sources/currency.py): the API server's current resourceVersion is read this
    # often (a quorum list of one item, Pod watches only), with this timeout; a stream that
    # has not reached it, or said nothing, for bookmark_s + grace_s is behind and relisted.
    probe_s: float = 5.0
    probe_timeout_s: float = 5.0
    bookmark_s: float = BOOKMARK_S
    grace_s: float = GRACE_S


def targets(namespaces: list[str], warmup: str | None) -> list[WatchTarget]:
    """Pods, Events, Deployments, StatefulSets in each namespace; the warmup DaemonSet by name."""
    out = [
        WatchTarget(kind, ns)
        for ns in namespaces
        for kind in ("Pod", "Event", "Deployment", "StatefulSet")
    ]
    if warmup:
        ns, _, name = warmup.partition("/")
        out.append(WatchTarget("DaemonSet", ns, f"metadata.name={name}"))
    return out


def _list_fn(api: client.ApiClient, kind: str) -> Callable[..., Any]:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    fns: dict[str, Callable[..., Any]] = {
        "Pod": core.list_namespaced_pod,
        "Event": core.list_namespaced_event,
        "Deployment": apps.list_namespaced_deployment,
        "StatefulSet": apps.list_namespaced_stateful_set,
        "DaemonSet": apps.list_namespaced_daemon_set,
    }
    return fns[kind]


def _lines(resp: urllib3.HTTPResponse) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked response, as bytes."""
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        *complete, buf = buf.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buf.strip():
        yield buf


class KubeWatch:
    """One list+watch loop for one target, in its own daemon thread."""

    def __init__(
        self,
        api: client.ApiClient,
        target: WatchTarget,
        deliver: Deliver,
        metrics: SourceMetrics,
        settings: WatchSettings | None = None,
        documents: Documents | None = None,
    ) -> None:
        """`deliver` takes the inputs decoded here and the list's `Relisted`; given
        `documents`, the documents go there as they came instead, undecoded."""
        self.target = target
        self.synced = threading.Event()
        self._call = _list_fn(api, target.kind)
        self._deliver = deliver
        self._documents = documents
        self._metrics = metrics
        self._settings = settings or WatchSettings()
        self._stop = threading.Event()
        self._resp: urllib3.HTTPResponse | None = None
        self._thread = threading.Thread(target=self._run, name=f"watch-{target.label}", daemon=True)
        self._synced_gauge = metrics.watch_synced.labels(target.kind, target.namespace)
        self.alive_at = time.monotonic()  # the last sign of life: see WatchSettings
        s = self._settings
        # Under _lock: the watch's thread, the probe's and the loop's use it.
        self._currency = Currency(s.bookmark_s, s.grace_s, s.probe_timeout_s)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Run in a thread of its own, unsupervised (tests; serve uses `supervised`)."""
        self._thread.start()

    async def supervised(self) -> None:
        """One run of the loop in a fresh thread, for the runtime's supervisor: returns or
        raises when the thread does, so anything that kills it (a bug, bad data no check
        foresaw) is logged, counted and restarted with a relist, never a watch dead in
        silence. Once stopped, it waits to be cancelled: a stop is not a failure."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def body() -> None:
            outcome: BaseException | None = None
            try:
                self._run()
            except BaseException as exc:  # handed to the loop: the supervisor judges it
                self._lost(f"watch thread failed: {type(exc).__name__}")
                outcome = exc
            with contextlib.suppress(RuntimeError):  # the loop closed first: nobody waits
                loop.call_soon_threadsafe(_settle, done, outcome)

        self._thread = threading.Thread(target=body, name=f"watch-{self.target.label}", daemon=True)
        self._thread.start()
        await done
        if self._stop.is_set():
            await loop.create_future()  # cancelled by the runtime as it stops

    def stale(self, now: float) -> str | None:
        """Why this watch cannot be trusted to be current, or None."""
        silent = now - self.alive_at
        if self.synced.is_set() and silent > self._settings.stale_after_s:
            return f"watch {self.target.label} silent for {silent:.0f}s"
        return None

    def _alive(self) -> None:
        self.alive_at = time.monotonic()

    # --- behind: is the picture the API server's present? (sources/currency.py) ---------
    def behind(self, now: float) -> str | None:
        """Why what this watch delivered may lag the API server, or None (`now`: monotonic).
        Behind for a reason the open stream will not mend: the stream is cut (a relist)."""
        with self._lock:
            cut = self._currency.needs_relist(now)
        if cut is not None:
            self._lost(cut)
        with self._lock:
            return self._currency.behind(now)

    def probe(self) -> None:
        """Read the API server's current resourceVersion (a quorum list of one item); blocks.
        Unanswered (the API server out of reach: the stream may be too, silently), or not
        reached by the stream in time: the stream is cut and the watch relists."""
        t = self._settings.probe_timeout_s
        with self._lock:
            self._currency.asking(time.monotonic())
        try:
            resp = self._call(self.target.namespace, **self._kwargs(limit=1, _request_timeout=t))
            try:
                doc = orjson.loads(resp.data)
            finally:
                resp.release_conn()  # every few seconds: back to the pool, never left open
            rv = doc["metadata"]["resourceVersion"]
        except ApiException as exc:  # it answered: reachable; the other rules still judge
            log.debug("watch probe refused", extra={"watch": self.target.label, "error": str(exc)})
            rv = None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._lost(f"the API server did not answer a probe: {type(exc).__name__}")
            with self._lock:
                self._currency.asked_at = None
            return
        except (ValueError, KeyError, TypeError) as exc:  # not a list: say so, judge on
            said = {"watch": self.target.label, "error": str(exc)}
            log.warning("watch probe unreadable", extra=said)
            rv = None
        with self._lock:
            self._currency.probed(rv if isinstance(rv, str) else None, time.monotonic())

    def relist(self, why: str) -> None:
        """What this watch delivered was lost downstream (`why`): list again, behind until
        the list is through."""
        self._lost(why)

    def _lost(self, why: str) -> None:
        """Events may have been missed: behind until a relist ends; an open stream is cut
        (a half-open one would otherwise keep the thread until its read timeout)."""
        with self._lock:
            first = self._currency.relist is None
            self._currency.lost(why)
        if not first or self._stop.is_set():
            return
        log.warning("watch behind: relisting", extra={"watch": self.target.label, "why": why})
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):  # best effort: the read fails or ends
                resp.shutdown()

    def _heard(self, rv: str | None) -> None:
        with self._lock:
            self._currency.heard(rv, time.monotonic())

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):  # best effort on the way out
                resp.shutdown()  # unblocks a read in progress

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # --- the loop -----------------------------------------------------------------------
    def _run(self) -> None:
        rv: str | None = None
        delay = self._settings.backoff_initial_s
        with self._lock:  # a fresh thread (a restart too) starts with a list
            self._currency.lost("listing")
        while not self._stop.is_set():
            try:
                if rv is None or self._relist_due():
                    rv = self._list()
                    self.synced.set()
                    self._synced_gauge.set(1)
                rv = self._watch(rv)
                delay = self._settings.backoff_initial_s
                self._restarted("ended")
            except Gone as exc:
                rv = None
                self._synced_gauge.set(0)
                self._lost("410 Gone: relisting")
                self._restarted("gone", str(exc))
            except ApiException as exc:
                if exc.status == 410:
                    rv = None
                    self._lost("410 Gone: relisting")
                    self._restarted("gone", exc.reason or "410")
                    continue
                delay = self._failed(delay, f"{exc.status} {exc.reason}")
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                delay = self._failed(delay, f"{type(exc).__name__}: {exc}")

    def _relist_due(self) -> bool:
        with self._lock:
            return self._currency.relist is not None

    def _failed(self, delay: float, cause: str) -> float:
        self._lost(f"watch failed ({cause}): relisting")
        return self._back_off(delay, cause)

    def _restarted(self, reason: str, detail: str = "") -> None:
        if self._stop.is_set():
            return
        self._metrics.watch_restarts.labels(self.target.kind, reason).inc()
        level = logging.DEBUG if reason == "ended" else logging.WARNING
        log.log(
            level,
            "watch restarted",
            extra={"watch": self.target.label, "reason": reason, "detail": detail},
        )

    def _back_off(self, delay: float, cause: str) -> float:
        if self._stop.is_set():
            return delay
        self._metrics.watch_restarts.labels(self.target.kind, "error").inc()
        wait = delay * (0.5 + random.random() / 2)  # jitter: replicas do not retry in step
        log.warning(
            "watch failed, backing off",
            extra={"watch": self.target.label, "cause": cause, "delay_s": round(wait, 2)},
        )
        self._stop.wait(wait)
        return min(delay * 2, self._settings.backoff_max_s)

    def _kwargs(self, **extra: Any) -> dict[str, Any]:
        kw: dict[str, Any] = {"_preload_content": False, **extra}
        if self.target.field_selector:
            kw["field_selector"] = self.target.field_selector
        if self.target.label_selector:
            kw["label_selector"] = self.target.label_selector
        return kw

    def _list(self) -> str:
        """List every page; deliver the items, then `Relisted`; return its resourceVersion."""
        cont: str | None = None
        uids: set[str] = set()
        at: float | None = None
        while True:
            kw = self._kwargs(limit=_LIST_PAGE, _request_timeout=(10, 60))
            if cont:
                kw["_continue"] = cont
            resp = self._call(self.target.namespace, **kw)
            if at is None:
                at = server_time(resp)  # the first page's: every page is that snapshot
            doc = orjson.loads(resp.data)
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            if not isinstance(meta, dict):  # ValueError: backed off and listed again
                raise ValueError(f"{self.target.kind} list is not an object with metadata")
            list_kind = f"{self.target.kind}List"
            for item in doc.get("items") or ():  # one at a time: a bad item spoils no other
                uid = (item.get("metadata") or {}).get("uid") if isinstance(item, dict) else None
                if isinstance(uid, str) and uid:
                    uids.add(uid)  # a refused item is still there: not reconciled away
                self._apply({"kind": list_kind, "items": [item]}, uid=uid)
            cont = meta.get("continue")
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
                self._relisted(uids, rv, at)
                self._alive()
                with self._lock:  # delivered to its end: caught up (the runtime drains it)
                    self._currency.listed(rv, time.monotonic())
                return rv

    def _relisted(self, uids: set[str], rv: str, at: float | None) -> None:
        t = self.target
        version = int(rv) if rv.isdigit() else 0
        self._deliver(
            [Relisted(t.kind, t.namespace, frozenset(uids), version, t.field_selector, at)]
        )

    def _watch(self, rv: str) -> str:
        """Stream events from `rv`; return the last version seen when the server ends it."""
        s = self._settings
        kw = self._kwargs(
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=s.timeout_s,
            _request_timeout=(10, s.read_timeout_s),
        )
        resp = self._call(self.target.namespace, **kw)
        self._resp = resp
        self._alive()
        try:
            for line in _lines(resp):
                if self._stop.is_set():
                    break
                rv = self._event(line, rv)
        finally:
            self._resp = None
            resp.release_conn()
        return rv

    def _event(self, line: bytes, rv: str) -> str:
        self._alive()
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self._refused(f"not JSON: {exc}")
            return rv
        etype = doc.get("type") if isinstance(doc, dict) else None
        obj = doc.get("object") if isinstance(doc, dict) else None
        if etype == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            if status.get("code") == 410:
                raise Gone(str(status.get("message") or "resource version too old"))
            raise ValueError(f"watch ERROR event: {status.get('message') or status}")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if etype is not None and not isinstance(meta, dict):
            # Not a watch event a decoder could read (an object that is a string, null, a
            # list; metadata that is not an object): skipped and said, the stream goes on.
            self._refused(f"{etype} event without an object with metadata: {line[:200]!r}")
            return rv
        new_rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if etype != "BOOKMARK":
            self._apply(doc, line)
        self._heard(str(new_rv) if new_rv else None)  # after the event is delivered
        return str(new_rv) if new_rv else rv

    def _apply(self, doc: Any, line: bytes | None = None, uid: Any = None) -> None:
        if self._documents is not None:  # decoded where it goes (the Kafka ingest)
            raw = line if line is not None else orjson.dumps(doc)
            self._documents(raw, uid if isinstance(uid, str) and uid else None)
            return
        try:
            inputs = normalize(doc)
        except InputError as exc:
            self._refused(str(exc))
            return
        if inputs:
            self._metrics.inputs.labels("kube").inc(len(inputs))
            self._deliver(inputs)

    def _refused(self, why: str) -> None:
        self._metrics.input_errors.labels("kube").inc()
        log.warning("watch input refused", extra={"watch": self.target.label, "error": why})


def _settle(done: asyncio.Future[None], outcome: BaseException | None) -> None:
    if done.done():
        return
    if outcome is None:
        done.set_result(None)
    else:
        done.set_exception(outcome)


# --- what serve and the Kafka ingest both do with their Pod watches ---------------------
def pod_watches(watches: list[KubeWatch]) -> list[KubeWatch]:
    return [w for w in watches if w.target.kind == "Pod"]


def pods_behind(watches: list[KubeWatch], metrics: SourceMetrics) -> str | None:
    """Why the Pod watches' picture may lag the API server (sources/currency.py), or None;
    `remediator_watch_behind` per watch. Pod deletions are held meanwhile."""
    now = time.monotonic()
    found: list[str] = []
    for w in pod_watches(watches):
        why = w.behind(now)
        metrics.watch_behind.labels(w.target.kind, w.target.namespace).set(0 if why is None else 1)
        if why is not None:
            found.append(f"watch {w.target.label} {why}")
    return "; ".join(found[:3]) if found else None


async def probe_forever(
    watches: list[KubeWatch], every_s: float, sleep: Callable[[float], Awaitable[None]]
) -> None:
    """Every `every_s`: the API server's current resourceVersion, for each Pod watch
    (`KubeWatch.probe`, in threads: the client blocks)."""
    while True:
        await asyncio.gather(*(asyncio.to_thread(w.probe) for w in pod_watches(watches)))
        await sleep(every_s)
