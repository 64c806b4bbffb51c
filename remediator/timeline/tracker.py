"""Applies inputs to pod timelines: inputs + now → changes. No I/O, no clock of its own."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterator
from typing import Final

from remediator.inputs.kubelet import already_present, pull_seconds
from remediator.inputs.pods import SpecInfo, engine_run, init_times, spec_info
from remediator.inputs.records import (
    EngineSpan,
    EngineStep,
    FirstToken,
    Input,
    PodEvent,
    PodSeen,
    Relisted,
)
from remediator.inputs.schema import PodSpec
from remediator.inputs.vllm_spans import marks
from remediator.timeline.endpoint import Endpoint, port_of
from remediator.timeline.engine_steps import EngineSteps
from remediator.timeline.model import (
    BACKOFF,
    PRESENT,
    PULLED,
    PULLING,
    RUN,
    SKEW_THRESHOLD_S,
    STARTED,
    PodTimeline,
    earliest,
    latest,
)

_SCHEDULED_TO: Final = " to "
_MAX_PARKED: Final = 10_000
_MAX_LABEL_SETS: Final = 4_096
# (spec, labels) objects whose spec_info is remembered: a few, kept alive
_MAX_SPEC_INFOS: Final = 64
_MAX_PARKED_STEPS: Final = 64  # per pod: a start-up marks about ten steps, times TP workers
DEFAULT_MAX_UNWATCHED: Final = 10_000  # pods known from webhooks alone (the service's setting)
# A list's Date header and an Event's creationTimestamp are whole seconds on the API server's
# clock: an Event this much older than a list was made before it.
LISTED_SLACK_S: Final = 2.0
_NO_TIME: Final = float("-inf")  # a Pod object without any timestamp: older than any with one


class StateChange:
    """A timeline moved from one state to another (or was first seen). Read, never changed.
    (A plain class: where the core is compiled its fields are read as a C struct's, where a
    msgspec struct's are looked up by name; the metrics and the policy read each change's.)"""

    __slots__ = ("timeline", "before", "after", "at")

    def __init__(self, timeline: PodTimeline, before: str | None, after: str, at: float) -> None:
        self.timeline = timeline
        self.before = before
        self.after = after
        self.at = at

    def __repr__(self) -> str:
        return (
            f"StateChange({self.timeline.uid!r}, {self.before!r} -> {self.after!r}, at={self.at})"
        )


class Tracker:
    """All pod timelines, by UID. A pod recreated under the same name is a new timeline;
    events that arrive before their pod start the timeline and the pod fills it in.

    `engines`: container names the policy says are the engine, first match wins (else the
    container that requests GPUs, else the first)."""

    def __init__(self, engines: tuple[str, ...] = ()) -> None:
        self.engines = engines
        self.by_uid: dict[str, PodTimeline] = {}
        self._by_name: dict[tuple[str, str], str] = {}
        # namespace -> state -> pods (by string twice: a (namespace, state) tuple per count
        # was built, hashed and compared twice on every state change)
        self._in_state: dict[str, dict[str, int]] = {}
        self._parked: dict[tuple[str, str], float] = {}  # name-only first tokens, pod unseen
        self._parked_steps: dict[tuple[str, str], list[EngineStep]] = {}  # likewise, log steps
        self._label_sets: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._spec_infos: dict[tuple[int, int], tuple[PodSpec, dict[str, str], SpecInfo]] = {}
        # Pruning (the service's memory bound; replay keeps everything to print it):
        self._ended: deque[tuple[float, str]] = deque()  # (deleted or first seen as orphan, uid)
        self._gone: dict[str, float] = {}  # pruned uid -> when: a late input is not a new pod
        self._gone_order: deque[tuple[float, str]] = deque()
        # Pods known from webhooks alone (never seen by the watch), oldest first, bounded.
        self.max_unwatched = DEFAULT_MAX_UNWATCHED
        self.unwatched_dropped = 0  # forgotten to keep under the bound (a counter)
        self.evicted: list[str] = []  # uids forgotten so, until the session drains them
        self._unwatched: dict[str, None] = {}
        self._new: str | None = None  # the timeline the input being applied created
        self._watched = True  # the input being applied came from the watch
        # Nodes whose clock is proven off, by how much (seconds ahead of the API server's;
        # negative: behind), as their pods last proved it; and those not yet reported.
        self.node_skew: dict[str, float] = {}
        self.skew_news: dict[str, float] = {}
        # Each namespace's last complete Pod list (no selector): an Event about a pod it did
        # not hold, made before it, is about a pod deleted before the list (Events outlive
        # their pods by an hour), not a pod to track.
        self._pods_listed: dict[str, Relisted] = {}

    @property
    def unwatched(self) -> int:
        """Pods tracked that only webhooks told of."""
        return len(self._unwatched)

    def __len__(self) -> int:
        return len(self.by_uid)

    def __iter__(self) -> Iterator[PodTimeline]:
        return iter(self.by_uid.values())

    def get(self, uid: str) -> PodTimeline | None:
        return self.by_uid.get(uid)

    def current(self, namespace: str, name: str) -> PodTimeline | None:
        """The newest pod of that name (the one a name-only alert means)."""
        uid = self._by_name.get((namespace, name))
        return self.by_uid.get(uid) if uid is not None else None

    def apply(self, item: Input, now: float, watched: bool = True) -> StateChange | None:
        """`watched`: the input came from the watch (or a replay), not from a webhook. Pods
        known from webhooks alone are capped at `max_unwatched`, the oldest forgotten first:
        anyone with the webhook token could otherwise post pods until memory runs out."""
        if watched:
            if self._unwatched and type(item) is PodSeen:
                self._unwatched.pop(item.uid, None)  # the watch sees it: not webhook-only
            return self._apply(item, now)
        self._take_new()
        self._watched = False  # a webhook's word proves nothing of a node's clock
        try:
            change = self._apply(item, now)
        finally:
            self._watched = True
        new = self._take_new()
        if new is not None:
            self._note_unwatched(new)
        return change

    def _take_new(self) -> str | None:
        """The timeline the input just applied created, if any; forgotten. (Read through a
        call: set to None in `apply`, the attribute stays None to mypy's narrowing across
        `_apply`, which a compiled core checks at run time.)"""
        new, self._new = self._new, None
        return new

    def _note_unwatched(self, uid: str) -> None:
        self._unwatched[uid] = None
        while len(self._unwatched) > self.max_unwatched:
            oldest = next(iter(self._unwatched))
            del self._unwatched[oldest]
            if oldest in self.by_uid:
                self.forget(oldest)
                self.unwatched_dropped += 1
                self.evicted.append(oldest)  # the session tells the policy engine

    def _apply(self, item: Input, now: float) -> StateChange | None:
        if self._gone and _uid_of(item) in self._gone:
            return None  # a late word about a pod already deleted and forgotten
        if type(item) is PodSeen:  # (a pointer compare: input kinds are final, inputs/records.py)
            t = self.by_uid.get(item.uid)  # (_timeline() only for a new one: a call less)
            if t is None:
                t = self._timeline(item.uid, item.namespace, item.name)
            self._pod(t, item)
            if self._watched:
                self._proved_by_pod(t, item)
        elif type(item) is PodEvent:
            t = self._event_timeline(item)
            _event(t, item, self._watched)
            if not t.pod_seen and not t.deleted and self._pods_listed:
                self._unlisted(t, item)
            if self._watched and t.skew_lo is not None and t.node:
                self._note_skew(t)
        elif type(item) is FirstToken:
            if item.uid:
                t = self._timeline(item.uid, item.namespace, item.pod)
            else:
                found = self.current(item.namespace, item.pod)
                if found is None:
                    self._park_first_token(item)  # the pod comes later: keep it till then
                    return None
                t = found
            t.first_token = item.at if t.first_token is None else min(t.first_token, item.at)
        elif type(item) is EngineStep:
            self._engine_step(item)
            return None  # a step inside engine init: no state changes
        elif type(item) is EngineSpan:
            for mark in marks(item):  # read as the log lines it stands for
                self._engine_step(mark)
            return None
        else:
            return None
        last = t.last_seen
        if last is None:
            if t.uid.startswith("?"):
                self._ended.append((now, t.uid))  # an orphan: pruned unless its pod comes
            t.last_seen = now
        elif now > last:
            t.last_seen = now
        after = t.state()
        return self._moved_to(t, after, now) if after != t.counted else None

    # ---- node clocks --------------------------------------------------------------------
    def _proved_by_pod(self, t: PodTimeline, p: PodSeen) -> None:
        """A status write is stamped by the API server after the kubelet stamped what it
        wrote: kubelet time − write time ≤ the node's skew (as for an Event)."""
        node, wrote = p.node_latest, p.written
        if node is not None and wrote is not None:
            lo = node - wrote
            if t.skew_lo is None or lo > t.skew_lo:
                t.skew_lo = lo
        if t.node and (t.skew_lo is not None or t.node_first is not None):
            self._note_skew(t)

    def _note_skew(self, t: PodTimeline) -> None:
        """Keep the node's proven skew (for the metric, a log line, a decision's note)."""
        node = t.node
        skew = t.clock_skew()
        if not node or not skew:
            return
        known = self.node_skew.get(node)
        if known is None or abs(skew - known) > max(SKEW_THRESHOLD_S, abs(known) / 10):
            self.node_skew[node] = skew
            self.skew_news[node] = skew

    def relisted(self, item: Relisted, now: float) -> list[StateChange]:
        """A complete list of a namespace's pods: those it no longer holds were deleted
        while the watch was away, known at the list's time. Only what the list covered:
        its namespace, its field selector, and pods not seen newer than the list (a
        webhook may have told of a pod created after it)."""
        if item.kind != "Pod":
            return []  # Events expire on their own; a missing one says nothing of its pod
        when = item.at if item.at is not None else now
        if not item.selector and item.at is not None:
            self._pods_listed[item.namespace] = item
        changes = []
        for t in list(self.by_uid.values()):
            if (
                t.namespace != item.namespace
                or (not t.pod_seen and t.uid.startswith("?"))  # (an orphan: its name only)
                or t.deleted
                or t.uid in item.uids
                or not item.covers(t.name)
                or (item.version and t.version > item.version)
            ):
                continue
            t.deleted, t.deleted_at = True, when
            change = self._moved(t, now)
            if change is not None:
                changes.append(change)
        return changes

    def _unlisted(self, t: PodTimeline, ev: PodEvent) -> None:
        """An Event, made before the namespace's last complete Pod list, about a pod with a
        UID that list did not hold: the pod was gone by then. (A pod made after the list has
        Events made after it; should one still come, its pod's first sight brings it back.)"""
        listed = self._pods_listed.get(t.namespace)
        if (
            listed is not None
            and listed.at is not None
            and ev.created is not None
            and ev.created < listed.at - LISTED_SLACK_S
            and not t.uid.startswith("?")
            and t.uid not in listed.uids
        ):
            t.deleted, t.deleted_at = True, listed.at

    def _moved(self, t: PodTimeline, now: float) -> StateChange | None:
        after = t.state()
        return self._moved_to(t, after, now) if after != t.counted else None

    def _moved_to(self, t: PodTimeline, after: str, now: float) -> StateChange:
        before = t.counted
        t.counted = after
        self._count(t.namespace, before, -1)
        self._count(t.namespace, after, +1)
        if after == "deleted":
            self._ended.append((now, t.uid))
        return StateChange(t, before, after, now)

    def _share(self, labels: dict[str, str]) -> dict[str, str]:
        """One dict per distinct label set: a Deployment's replicas carry the same labels,
        and holding them once is most of what keeps a tracked pod under 2 KiB."""
        key = tuple(labels.items())
        shared = self._label_sets.get(key)
        if shared is not None:
            return shared
        if len(self._label_sets) < _MAX_LABEL_SETS:  # bounded: unique sets stay unshared
            self._label_sets[key] = labels
        return labels

    def _spec_info(self, spec: PodSpec, labels: dict[str, str]) -> SpecInfo:
        """`spec_info`, remembered for the spec and label objects it was worked out from
        (kept with the answer, so an identity is never reused while remembered): where a
        source hands one spec object to many pods (a replay's, the simulator's), each
        pod's is not parsed again."""
        key = (id(spec), id(labels))
        known = self._spec_infos.get(key)
        if known is not None and known[0] is spec and known[1] is labels:
            return known[2]
        info = spec_info(spec, labels, self.engines)
        if len(self._spec_infos) >= _MAX_SPEC_INFOS:
            self._spec_infos.clear()
        self._spec_infos[key] = (spec, labels, info)
        return info

    def _park_first_token(self, item: FirstToken) -> None:
        key = (item.namespace, item.pod)
        self._parked[key] = min(item.at, self._parked.get(key, item.at))
        if len(self._parked) > _MAX_PARKED:
            del self._parked[next(iter(self._parked))]  # the oldest: bounded memory

    def _engine_step(self, item: EngineStep) -> None:
        if item.uid:
            t = self._timeline(item.uid, item.namespace, item.pod)
        else:
            found = self.current(item.namespace, item.pod)
            if found is None:
                self._park_step(item)  # a recording may hold the log before the pod
                return
            t = found
        if t.engine is None:
            t.engine = EngineSteps()
        t.engine.see(item)

    def _park_step(self, item: EngineStep) -> None:
        parked = self._parked_steps.setdefault((item.namespace, item.pod), [])
        if len(parked) < _MAX_PARKED_STEPS:
            parked.append(item)
        if len(self._parked_steps) > _MAX_PARKED:
            del self._parked_steps[next(iter(self._parked_steps))]  # the oldest: bounded

    def _adopt_steps(self, t: PodTimeline, created: float | None) -> None:
        for item in self._parked_steps.pop((t.namespace, t.name), ()):
            if created is None or item.at >= created:
                if t.engine is None:
                    t.engine = EngineSteps()
                t.engine.see(item)

    def timeline_of(self, item: EngineStep | EngineSpan) -> PodTimeline | None:
        return self.by_uid.get(item.uid) if item.uid else self.current(item.namespace, item.pod)

    def forget(self, uid: str) -> None:
        """Drop a finished timeline (the runtime prunes deleted pods after export)."""
        t = self.by_uid.pop(uid, None)
        if t is None:
            return
        self._unwatched.pop(uid, None)
        self._count(t.namespace, t.counted, -1)
        if self._by_name.get((t.namespace, t.name)) == uid:
            del self._by_name[(t.namespace, t.name)]

    def prune(self, now: float, grace_s: float, gone: list[tuple[str, str]] | None = None) -> int:
        """Forget deleted timelines, and orphans (events whose pod never came), `grace_s`
        after they ended, so a service's memory is bounded by the pods alive, not by every
        pod it ever saw. Their uids are remembered as gone for as long again, so a late
        event does not bring one back. Their histograms were observed as they happened;
        the per-pod gauges are read off the tracker, so they go with the timeline.
        `gone`: (namespace, name) of each timeline forgotten is appended to it."""
        pruned = 0
        while self._ended and self._ended[0][0] <= now - grace_s:
            _, uid = self._ended.popleft()
            t = self.by_uid.get(uid)
            if t is None or not (t.deleted or uid.startswith("?")):
                continue  # gone already, or an orphan its pod adopted
            self.forget(uid)
            if gone is not None:
                gone.append((t.namespace, t.name))
            self._gone[uid] = now
            self._gone_order.append((now, uid))
            pruned += 1
        while self._gone_order and self._gone_order[0][0] <= now - grace_s:
            _, uid = self._gone_order.popleft()
            self._gone.pop(uid, None)
        return pruned

    # ---- internals --------------------------------------------------------------------
    def _timeline(self, uid: str, namespace: str, name: str) -> PodTimeline:
        t = self.by_uid.get(uid)
        if t is None:
            ns, nm = sys.intern(namespace), sys.intern(name)
            t = self.by_uid[uid] = PodTimeline(uid=uid, namespace=ns, name=nm)
            self._new = uid
            orphan = self.by_uid.pop(_orphan_key(namespace, name), None)
            if orphan is not None:
                self._unwatched.pop(orphan.uid, None)
                self._adopt(t, orphan)
            self._by_name.setdefault((ns, nm), uid)
        return t

    def _event_timeline(self, ev: PodEvent) -> PodTimeline:
        if ev.pod_uid:
            return self._timeline(ev.pod_uid, ev.namespace, ev.pod)
        uid = self._by_name.get((ev.namespace, ev.pod)) or _orphan_key(ev.namespace, ev.pod)
        t = self.by_uid.get(uid)
        if t is None:
            t = self.by_uid[uid] = PodTimeline(uid=uid, namespace=ev.namespace, name=ev.pod)
            self._new = uid
        return t

    def _adopt(self, t: PodTimeline, orphan: PodTimeline) -> None:
        """Events without a UID came before their pod: merge their facts into it.
        The orphan's count in `in_state` passes to `t`: until the input that found the pod
        applies, `t` has the orphan's facts and so its state (apply() moves it from there)."""
        t.scheduled_event = earliest(t.scheduled_event, orphan.scheduled_event)
        t.init_started = earliest(t.init_started, orphan.init_started)
        t.has_init = t.has_init or orphan.has_init
        t.skew_lo = latest(t.skew_lo, orphan.skew_lo)
        t.unschedulable = t.unschedulable or orphan.unschedulable
        t.node = t.node or orphan.node
        for entry in orphan.log or ():
            t.see(*entry)
        t.last_seen = orphan.last_seen
        t.counted = orphan.counted

    def _pod(self, t: PodTimeline, p: PodSeen) -> None:
        # (each field read once: a msgspec struct's field is looked up by name, compiled too)
        spec, created, node, at = p.spec, p.created, p.node, p.at
        if not t.pod_seen:
            t.pod_seen = True
            if t.deleted and p.watch != "DELETED":
                t.deleted, t.deleted_at = False, None  # a list's inference; the pod says no
            info = self._spec_info(spec, p.labels)
            t.model, t.tp_size, t.gpu_util = _intern(info.model), info.tp_size, info.gpu_util
            t.gpus = info.gpus
            t.labels, t.owner = self._share(p.labels), _intern(p.owner)
            t.has_init = t.has_init or bool(spec.initContainers)
            t.set_main_container(_intern(info.container))
            model = _intern(info.served_model) if info.served_model else t.model
            ep = Endpoint(_intern(info.container), p.pod_ip, port_of(info.port), model)
            t.endpoint = ep
            key = (p.namespace, p.name)
            if created is not None or key not in self._by_name:
                self._claim_name(t, created)
            self._adopt_steps(t, created)
            parked = self._parked.pop(key, None)
            if parked is not None and (created is None or parked >= created):
                t.first_token = parked if t.first_token is None else min(t.first_token, parked)
        if created is not None:
            t.created = created
        ip, was = p.pod_ip, t.endpoint
        if ip and was is not None and ip != was.ip:
            t.endpoint = Endpoint(was.container, ip, was.port, was.model)  # (replace() is slow)
        if node and node != t.node:
            t.node = sys.intern(node)
        scheduled = p.scheduled
        if scheduled is not None and (t.scheduled is None or scheduled < t.scheduled):
            t.scheduled = scheduled
        main = t.main_container
        run = engine_run(p.statuses, main)
        started, first = run.started, run.first_started
        if started is not None and not (t.runs_seen and started == t.started):
            t.see(started, RUN, -1.0, main)  # (the run seen last time: known)
        if first is not None and first != started:
            t.see(first, RUN, -1.0, main)
        if p.init_statuses or (p.initialized is not None and t.has_init):
            self._init(t, p)  # (else there is nothing for it to take)
        ready = p.ready
        if ready is not None and (t.ready is None or ready < t.ready):
            t.see_ready(ready)
        if run.restarts > t.restarts:
            t.restarts = run.restarts
        version = p.version
        if version > t.version:
            t.version = version
        # What the pod shows now: the newest object decides, whatever order they came in.
        if at is None:
            at = _NO_TIME
        shown = t.waiting_at
        if shown is None or at > shown[0] or (at == shown[0] and version >= shown[1]):
            t.waiting_at, t.waiting_reason = (at, version), run.waiting
            t.unschedulable = p.unschedulable if scheduled is None else None
        phase = p.phase
        if phase == "Failed":
            t.failed = True
        elif phase == "Succeeded":
            t.succeeded = True
        if p.deleting:
            t.terminating = True
        if p.watch == "DELETED" and not t.deleted:
            t.deleted, t.deleted_at = True, p.at  # (None where it has no time)

    def _init(self, t: PodTimeline, p: PodSeen) -> None:
        first, done = init_times(p.spec, p.init_statuses)
        if first is not None and (t.init_started is None or first < t.init_started):
            t.init_started = first
        if not t.has_init:
            return
        for end in (done, p.initialized):
            if end is not None and (t.init_done is None or end < t.init_done):
                t.init_done = end

    def _claim_name(self, t: PodTimeline, created: float | None) -> None:
        """Pod names are unique at any moment: of two pods with one name the older is gone,
        even when a watch gap lost its DELETED (else it would look stuck forever)."""
        key = (t.namespace, t.name)
        holder = self.by_uid.get(self._by_name.get(key, ""))
        if holder is None or holder is t or (holder.created or 0.0) <= (created or 0.0):
            self._by_name[key] = t.uid
            if holder is not None and holder is not t and not holder.deleted:
                holder.deleted, holder.deleted_at = True, created
                self._count(holder.namespace, holder.counted, -1)
                self._count(holder.namespace, "deleted", +1)
                holder.counted = "deleted"
        elif not t.deleted:
            t.deleted, t.deleted_at = True, holder.created  # apply() counts t's change

    def _count(self, namespace: str, state: str | None, delta: int) -> None:
        if state is None:
            return
        states = self._in_state.get(namespace)
        if states is None:
            states = self._in_state[namespace] = {}
        n = states.get(state, 0) + delta
        if n:
            states[state] = n
        else:
            states.pop(state, None)
            if not states:
                del self._in_state[namespace]

    @property
    def in_state(self) -> dict[tuple[str, str], int]:
        """(namespace, state) → pods in it (a copy, for the metrics and the tests)."""
        return {(ns, st): n for ns, states in self._in_state.items() for st, n in states.items()}


def _uid_of(item: Input) -> str | None:
    if type(item) is PodSeen:
        return item.uid
    if type(item) is PodEvent:
        return item.pod_uid
    return None


def _intern(value: str | None) -> str | None:
    return sys.intern(value) if value is not None else None


def _orphan_key(namespace: str, name: str) -> str:
    return f"?{namespace}/{name}"


# Events the scheduler writes (the API server's clock); the rest come from the kubelet.
_SCHEDULER: Final = frozenset({"Scheduled", "FailedScheduling"})


def _event(t: PodTimeline, ev: PodEvent, watched: bool = True) -> None:
    when = ev.first if ev.first is not None else ev.last
    if when is None:
        return
    reason = ev.reason
    if reason in _SCHEDULER:
        _scheduler_event(t, ev, when)
        return
    if watched and ev.created is not None:
        # An Event is created after it happened: kubelet time − creation ≤ the node's skew.
        lo = when - ev.created
        if t.skew_lo is None or lo > t.skew_lo:
            t.skew_lo = lo
    if ev.init:
        # An init container (weights download, sidecar): its pulls and runs are `init`.
        t.has_init = True
        if reason in ("Pulling", "Started", "Pulled"):
            t.init_started = earliest(t.init_started, when)
        return
    container = sys.intern(ev.container) if ev.container is not None else None
    if reason == "Pulling":
        t.see(when, PULLING, -1.0, container)
    elif reason == "Pulled":
        if already_present(ev.message):
            t.see(when, PRESENT, -1.0, container)
        else:
            reported = pull_seconds(ev.message)
            t.see(when, PULLED, reported if reported is not None else -1.0, container)
    elif reason == "Started":
        t.see(when, STARTED, -1.0, container)
    elif reason in ("BackOff", "Failed") and _about_pulling(ev.message):
        last = ev.last if ev.last is not None else when  # the latest back-off
        t.see(last, BACKOFF, -1.0, container)


def _scheduler_event(t: PodTimeline, ev: PodEvent, when: float) -> None:
    if ev.reason == "Scheduled":
        t.scheduled_event = when if t.scheduled_event is None else min(t.scheduled_event, when)
        cut = ev.message.rfind(_SCHEDULED_TO)
        if t.node is None and cut > 0:
            t.node = ev.message[cut + len(_SCHEDULED_TO) :].strip() or None
        t.unschedulable = None
    elif t.scheduled_at() is None:
        t.unschedulable = ev.message


def _about_pulling(message: str) -> bool:
    # "Back-off pulling image ...", "Failed to pull image ...", "Error: ErrImagePull"
    return "pull" in message.lower()
