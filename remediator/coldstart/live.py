"""`kubectl coldstart --watch`: the snapshot's core, kept current by watches, redrawn in place.

The pods (the target's selector) and their Events are watched with serve's own `KubeWatch`
(raw JSON, resume from the last resourceVersion, relist on 410, back off on errors); with
`--logs`, serve's `EngineLogFollower` follows the engine log of each pod while it is in engine
init. Their inputs go through a queue to the one thread that feeds the tracker; the screen is
redrawn at most once a second (and once a second while a pod waits, so its "for 312s" counts).
Ctrl-C ends it; the caller exits 0.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes import client
from prometheus_client import CollectorRegistry

from remediator.coldstart.snapshot import Snapshot, event_selector
from remediator.inputs.records import Input, PodSeen
from remediator.policy.config import EngineLogsConfig
from remediator.runtime.clock import ClusterTime, SystemClock
from remediator.sources.engine_logs import EngineLogFollower, LogMetrics, in_engine_init
from remediator.sources.kube_watch import KubeWatch, WatchTarget
from remediator.sources.metrics import SourceMetrics

FRAME_S = 1.0  # at most one redraw a second
Draw = Callable[[Snapshot, float, list[str]], None]


@dataclass
class Follow:
    """Everything the watch started, stopped by `stop()` (the threads are daemons too)."""

    snap: Snapshot
    watches: list[KubeWatch] = field(default_factory=list)
    follower: EngineLogFollower | None = None
    inbox: queue.SimpleQueue[list[Input]] = field(default_factory=queue.SimpleQueue)
    metrics: SourceMetrics = field(default_factory=lambda: SourceMetrics.on(CollectorRegistry()))

    def deliver(self, items: list[Input]) -> None:  # from the watch threads
        self.inbox.put(items)

    def stop(self) -> None:
        for w in self.watches:
            w.stop()
        if self.follower is not None:
            self.follower.stop(join_s=1.0)
        for w in self.watches:
            w.join(1.0)

    def restarts(self) -> int:
        total = 0.0
        for metric in self.metrics.watch_restarts.collect():
            for sample in metric.samples:
                labels = sample.labels
                if sample.name.endswith("_total") and labels.get("reason") == "error":
                    total += sample.value
        return int(total)


def start(
    api: client.ApiClient,
    snap: Snapshot,
    pod_selectors: dict[str, str | None],
    *,
    logs: bool,
    log_bytes: int,
) -> Follow:
    f = Follow(snap)
    ns = snap.namespace
    targets = [
        WatchTarget(
            "Pod",
            ns,
            field_selector=pod_selectors.get("field_selector"),
            label_selector=pod_selectors.get("label_selector"),
        )
    ]
    if snap.events_api == "events":
        targets.append(WatchTarget("Event", ns, field_selector=event_selector("", snap.target)))
    for target in targets:
        w = KubeWatch(api, target, f.deliver, f.metrics)
        f.watches.append(w)
        w.start()
    if logs and not snap.logs_forbidden:
        cfg = EngineLogsConfig(follow=True, max_bytes=log_bytes)
        registry = CollectorRegistry()
        f.follower = EngineLogFollower(api, cfg, f.deliver, LogMetrics.on(registry))
    return f


def run(f: Follow, draw: Draw, stop: threading.Event | None = None) -> None:
    """Feed and redraw until Ctrl-C (KeyboardInterrupt, which the caller turns into exit 0)
    or until `stop` is set."""
    snap = f.snap
    clock = ClusterTime(SystemClock())
    clock.observe(snap.now())
    next_frame = time.monotonic()
    while stop is None or not stop.is_set():
        wait = max(0.0, next_frame - time.monotonic())
        try:
            items = f.inbox.get(timeout=wait) if wait else f.inbox.get_nowait()
        except queue.Empty:
            items = None
        if items is not None:
            _feed(snap, clock, items)
            if time.monotonic() < next_frame:
                continue
        if f.follower is not None:
            f.follower.sync(in_engine_init(snap.timelines(), lambda t: True))
        notes = []
        errors = f.restarts()
        if errors:
            notes.append(f"watch errors so far: {errors} (retrying)")
        draw(snap, clock.now(), notes)
        next_frame = time.monotonic() + FRAME_S


def _feed(snap: Snapshot, clock: ClusterTime, items: list[Input]) -> None:
    for item in items:
        if isinstance(item, PodSeen):
            snap.uids.add(item.uid)  # the watch's selector is the target's: a new replica
        clock.observe(item.at)
    snap.feed(items)
