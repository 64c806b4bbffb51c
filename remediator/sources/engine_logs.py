"""Follow inference pods' logs while they are in engine init: vLLM's step lines become inputs.

`GET /api/v1/namespaces/NS/pods/NAME/log?container=C&follow=true&timestamps=true&limitBytes=N`
(RBAC: `pods/log` get), raw bytes through the `kubernetes` client (`_preload_content=False`),
one thread per followed pod: the client is synchronous and a silent log must not stall the loop.

Bounded three ways: only pods the policy selects and only while they are in engine init (the
loop calls `sync` with those; a pod that leaves engine init is let go at once), at most
`max_pods` at once, at most `max_bytes` per pod (the API server stops there: limitBytes).
Each line is tested with a substring check before any parsing; only lines that end a step
become `EngineStep` inputs, stamped with the kubelet's time for the line.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Gauge

from remediator.inputs.records import EngineStep, Input
from remediator.inputs.timefmt import parse_time
from remediator.inputs.vllm_log import KEYWORDS, LOG_ENDED, is_reprint, parse_line, vllm_clock
from remediator.logfields import get_logger
from remediator.policy.config import EngineLogsConfig
from remediator.timeline.model import PodTimeline

log = get_logger(__name__)

Deliver = Callable[[list[Input]], None]  # must be safe to call from a worker thread
_KEYS = tuple(k.encode() for k in KEYWORDS)
_FORGET_AFTER = 4096  # pods whose log ended, remembered so they are not read twice


@dataclass(frozen=True, slots=True)
class LogMetrics:
    followed: Gauge
    bytes_read: Counter
    lines: Counter
    steps: Counter
    errors: Counter
    cpu: Counter

    @classmethod
    def on(cls, registry: CollectorRegistry) -> LogMetrics:
        return cls(
            followed=Gauge(
                "remediator_engine_logs_followed", "Pod logs followed now.", registry=registry
            ),
            bytes_read=Counter(
                "remediator_engine_log_bytes_total",
                "Bytes of pod logs read while pods were in engine init.",
                registry=registry,
            ),
            lines=Counter(
                "remediator_engine_log_lines_total", "Pod log lines read.", registry=registry
            ),
            steps=Counter(
                "remediator_engine_log_steps_total",
                "Log lines that ended a vLLM engine-init step, by step.",
                ["step"],
                registry=registry,
            ),
            errors=Counter(
                "remediator_engine_log_errors_total",
                "Log follows that failed (API errors, broken streams).",
                registry=registry,
            ),
            cpu=Counter(
                "remediator_engine_log_cpu_seconds_total",
                "CPU the log-following threads used (read, filter, parse), counted as each ends.",
                registry=registry,
            ),
        )


def _lines(resp: urllib3.HTTPResponse) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        *complete, buf = buf.split(b"\n")
        yield from complete
    if buf:
        yield buf


def step_of(raw: bytes, namespace: str, pod: str, uid: str) -> EngineStep | None:
    """One `timestamps=true` log line → the step it ends, or None (most lines)."""
    if not any(k in raw for k in _KEYS):
        return None
    text = raw.decode("utf-8", "replace")
    stamp, _, line = text.partition(" ")
    mark = parse_line(line)
    if mark is None:
        return None
    try:
        at = parse_time(stamp)
    except ValueError:
        return None  # not the kubelet's prefix: a line cut by limitBytes, say
    logged, reprint = vllm_clock(line, at), is_reprint(line)  # Ray's late copies
    return EngineStep(
        namespace, pod, uid, mark.step, mark.reported_s, mark.detail, at, logged, reprint
    )


class _Follow:
    """One pod's log, read in a daemon thread until it ends, is let go, or hits its bound."""

    def __init__(
        self,
        core: client.CoreV1Api,
        t: PodTimeline,
        container: str,
        cfg: EngineLogsConfig,
        deliver: Deliver,
        metrics: LogMetrics,
    ) -> None:
        self.namespace, self.pod, self.uid, self.container = t.namespace, t.name, t.uid, container
        self._core, self._cfg, self._deliver, self._metrics = core, cfg, deliver, metrics
        self._resp: urllib3.HTTPResponse | None = None
        self._stop = threading.Event()
        self.read = 0
        self.cpu_s = 0.0  # this follow's own CPU (its thread's), once it has ended
        self._last: EngineStep | None = None  # the last step line read
        self.thread = threading.Thread(target=self._run, name=f"log-{t.name}", daemon=True)
        self.thread.start()

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        resp = self._resp
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown() if hasattr(resp, "shutdown") else resp.close()

    def _run(self) -> None:
        fields = {"pod": f"{self.namespace}/{self.pod}", "container": self.container}
        try:
            resp = cast(
                urllib3.HTTPResponse,
                self._core.read_namespaced_pod_log(
                    self.pod,
                    self.namespace,
                    container=self.container,
                    follow=True,
                    timestamps=True,
                    limit_bytes=self._cfg.max_bytes,
                    _preload_content=False,
                ),
            )
            self._resp = resp
            if self._stop.is_set():
                return
            for raw in _lines(resp):
                self.read += len(raw) + 1
                self._metrics.lines.inc()
                step = step_of(raw, self.namespace, self.pod, self.uid)
                if step is not None:
                    self._metrics.steps.labels(step.step).inc()
                    self._deliver([step])
                    self._last = step
                if self._stop.is_set():
                    break
        except ApiException as exc:
            self._metrics.errors.inc()
            log.warning("pod log not readable", extra={**fields, "status": exc.status})
        except Exception as exc:  # a stream cut by stop() or the network
            if not self._stop.is_set():
                self._metrics.errors.inc()
                log.warning("pod log stream broke", extra={**fields, "error": repr(exc)})
        finally:
            self._ended()
            self.cpu_s = time.thread_time()
            self._metrics.cpu.inc(self.cpu_s)
            self._metrics.bytes_read.inc(self.read)
            if self._resp is not None:
                with contextlib.suppress(Exception):
                    self._resp.release_conn()

    def _ended(self) -> None:
        """Read no further while the pod is still wanted (its bound, EOF, an error): say so,
        so that the core stops judging its progress by a log it no longer sees."""
        last = self._last
        if self._stop.is_set() or last is None:
            return
        ended = EngineStep(last.namespace, last.pod, last.uid, LOG_ENDED, None, None, last.at)
        self._deliver([ended])


class EngineLogFollower:
    def __init__(
        self,
        api: client.ApiClient,
        cfg: EngineLogsConfig,
        deliver: Deliver,
        metrics: LogMetrics,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._cfg = cfg
        self._deliver = deliver
        self._metrics = metrics
        self._following: dict[str, _Follow] = {}
        self._ended: dict[str, float] = {}  # uid → when its log ended: never read twice
        self.history: deque[tuple[str, int, float]] = deque(maxlen=256)  # (pod, bytes, CPU s)

    def sync(self, in_engine_init: list[PodTimeline], first: Collection[str] = ()) -> None:
        """From the loop, about once a second: follow these pods, let go of all others.
        `first`: the pods the core would judge on their phase budget alone, their log never
        read (`PolicyEngine.logs_wanted`): followed now, up to `max_pods` beyond the bound."""
        wanted = {t.uid: t for t in in_engine_init}
        for uid, f in list(self._following.items()):
            if uid not in wanted or f.done:
                f.stop()
                del self._following[uid]
                self.history.append((f"{f.namespace}/{f.pod}", f.read, f.cpu_s))
                self._ended[uid] = time.monotonic()
        if len(self._ended) > _FORGET_AFTER:
            for uid in sorted(self._ended, key=self._ended.__getitem__)[: _FORGET_AFTER // 2]:
                del self._ended[uid]
        bound, urgent = self._cfg.max_pods, {u: None for u in first if u in wanted}  # (in order)
        for uid in (*urgent, *wanted):
            if len(self._following) >= (2 * bound if uid in urgent else bound):
                continue
            t = wanted[uid]
            container = t.endpoint.container if t.endpoint is not None else None
            if uid in self._following or uid in self._ended or container is None:
                continue
            self._following[uid] = _Follow(
                self._core, t, container, self._cfg, self._deliver, self._metrics
            )
        self._metrics.followed.set(len(self._following))

    def following(self) -> list[str]:
        return [f"{f.namespace}/{f.pod}" for f in self._following.values()]

    def stop(self, join_s: float = 2.0) -> None:
        for f in self._following.values():
            f.stop()
        for f in self._following.values():
            f.thread.join(join_s)
            self.history.append((f"{f.namespace}/{f.pod}", f.read, f.cpu_s))
        self._following.clear()
        self._metrics.followed.set(0)

    def bytes_by_pod(self) -> dict[str, int]:
        return {f"{f.namespace}/{f.pod}": f.read for f in self._following.values()}


def in_engine_init(
    pods: Iterable[PodTimeline], selected: Callable[[PodTimeline], bool]
) -> list[PodTimeline]:
    """The tracked pods in engine init that the policy selects, oldest first."""
    out = [t for t in pods if t.state() == "engine_init" and selected(t)]
    out.sort(key=lambda t: t.started_at() or 0.0)
    return out
