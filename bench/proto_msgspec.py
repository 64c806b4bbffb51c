"""Prototype (not wired in): typed msgspec decoding of watch lines for the core's hot path.

msgspec parses only the fields declared below and skips the rest of a 6 KB Pod
(managedFields, volumes, probes, env) without building Python objects for it. The records
it yields are the core's own (PodSeen, PodEvent), so Tracker and TimelineMetrics are
unchanged. `python bench/proto_msgspec.py [--pods N]` checks it against the real decode
on a generated stream and times both beside bare orjson.loads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_core import Core  # noqa: E402

from remediator.inputs.decode import decode  # noqa: E402
from remediator.inputs.events import pod_event  # noqa: E402
from remediator.inputs.records import Input, PodSeen  # noqa: E402
from remediator.inputs.timefmt import parse_time, parse_time_or_none  # noqa: E402
from remediator.sim import watch_stream  # noqa: E402


class Cond(msgspec.Struct):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None
    reason: str | None = None
    message: str | None = None


class Running(msgspec.Struct):
    startedAt: str | None = None


class Waiting(msgspec.Struct):
    reason: str | None = None


class State(msgspec.Struct):
    running: Running | None = None
    waiting: Waiting | None = None


class CStatus(msgspec.Struct):
    name: str = ""
    restartCount: int = 0
    state: State | None = None


class Resources(msgspec.Struct):
    limits: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None


class Container(msgspec.Struct):
    name: str = ""
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    resources: Resources | None = None


class Spec(msgspec.Struct):
    nodeName: str | None = None
    containers: list[Container] = []


class Owner(msgspec.Struct):
    kind: str = ""
    name: str = ""
    controller: bool = False


class Meta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    labels: dict[str, str] | None = None
    ownerReferences: list[Owner] | None = None


class Status(msgspec.Struct):
    phase: str | None = None
    conditions: list[Cond] | None = None
    containerStatuses: list[CStatus] | None = None


class Obj(msgspec.Struct):
    kind: str | None = None
    metadata: Meta | None = None
    spec: Spec | None = None
    status: Status | None = None
    # Event fields (both APIs): decoded to plain dicts/values, small objects
    involvedObject: dict[str, Any] | None = None
    regarding: dict[str, Any] | None = None


class WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw  # decoded a second time, typed, only for kinds we know


_watch = msgspec.json.Decoder(WatchEvent)
_obj = msgspec.json.Decoder(Obj)
_event = msgspec.json.Decoder(dict[str, Any])


def fast_decode(raw: bytes) -> list[Input]:
    ev = _watch.decode(raw)
    body = bytes(ev.object)
    if body.startswith(b'{"kind":"Event"'):
        return [e] if (e := pod_event(ev.type, _event.decode(body))) is not None else []  # type: ignore[arg-type]
    obj = _obj.decode(body)
    if obj.kind != "Pod":
        return decode(raw)  # everything else: the general path
    return [_pod(ev.type, obj)]


def _pod(watch: Any, obj: Obj) -> PodSeen:
    meta, spec, status = obj.metadata or Meta(), obj.spec or Spec(), obj.status or Status()
    created = parse_time_or_none(meta.creationTimestamp)
    scheduled = ready = unschedulable = None
    latest = created
    for c in status.conditions or ():
        t = parse_time(c.lastTransitionTime) if c.lastTransitionTime else None
        if t is not None and (latest is None or t > latest):
            latest = t
        if c.type == "PodScheduled":
            if c.status == "True":
                scheduled = t
            elif c.reason == "Unschedulable":
                unschedulable = c.message or "Unschedulable"
        elif c.type == "Ready" and c.status == "True":
            ready = t
    started, restarts, waiting = None, 0, None
    cs = status.containerStatuses
    if cs:
        main = cs[0]
        restarts = main.restartCount
        st = main.state or State()
        if st.running is not None:
            started = parse_time_or_none(st.running.startedAt)
            if started is not None and (latest is None or started > latest):
                latest = started
        elif st.waiting is not None:
            waiting = st.waiting.reason
    owner = next((f"{o.kind}/{o.name}" for o in meta.ownerReferences or () if o.controller), None)
    return PodSeen(
        watch=watch, uid=meta.uid, namespace=meta.namespace, name=meta.name, created=created,
        node=spec.nodeName, phase=status.phase, scheduled=scheduled, unschedulable=unschedulable,
        ready=ready, started=started, restarts=restarts, waiting_reason=waiting,
        deleting=bool(meta.deletionTimestamp), labels=meta.labels or {},
        spec={"containers": [msgspec.structs.asdict(c) | {"resources": msgspec.structs.asdict(
            c.resources) if c.resources else {}} for c in spec.containers]},
        owner=owner, at=latest,
    )  # fmt: skip


class FastCore(Core):
    def feed_line(self, line: bytes) -> None:
        for item in fast_decode(line):
            if item.at is not None and item.at > self.now:
                self.now = item.at
            change = self.tracker.apply(item, self.now)
            if change is not None:
                self.metrics.observe(change)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    lines = [line for line, _ in watch_stream(args.pods, seed=7)]
    ref, fast = Core(), FastCore()
    for line in lines:
        ref.feed_line(line)
        fast.feed_line(line)
    same = [t.to_json() for t in ref.tracker] == [t.to_json() for t in fast.tracker]
    print(f"prototype timelines identical to the core's: {same}")
    best = {"orjson.loads": 9e9, "core": 9e9, "msgspec core": 9e9}
    for _ in range(args.repeat):
        for name, run in (
            ("orjson.loads", lambda: _loads(lines)),
            ("core", lambda: _feed(Core(), lines)),
            ("msgspec core", lambda: _feed(FastCore(), lines)),
        ):
            t0 = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t0)
    for name, secs in best.items():
        print(f"{name:<14}{len(lines) / secs:>10,.0f} lines/s {secs / len(lines) * 1e6:6.1f} µs")
    print(f"msgspec core / orjson.loads = {best['orjson.loads'] / best['msgspec core']:.2f}")
    return 0 if same else 1


def _loads(lines: list[bytes]) -> None:
    for line in lines:
        orjson.loads(line)


def _feed(core: Core, lines: list[bytes]) -> None:
    parse_time.cache_clear()
    for line in lines:
        core.feed_line(line)


if __name__ == "__main__":
    raise SystemExit(main())
