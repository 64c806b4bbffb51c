"""One pod's cold start, as facts that only ever narrow, and the phases derived from them.

Every fact is kept as a min or a max of what was observed, or as an entry of a small
de-duplicated log that the phases are derived from, so applying the same input twice, or
inputs in any order, gives the same timeline (duplicate and out-of-order watch events are
normal). The current state is derived from the facts, never stored as a transition, so
no order of inputs can leave it illegal.

The engine is one container (the policy's, else the one with GPUs, else the first): its
starts make `container_start` and `engine_init`; the main containers' pulls make
`image_pull`; init containers (sidecars too) make `init`, never `image_pull`. The cold
start is the first start: pulls after it, and later runs, belong to restarts.

Two clocks: `created` and `scheduled` are the API server's; every kubelet fact (pulls,
starts, Ready, init) is the node's. Phases within the node are differences on one clock
and so exact; where the node's clock is proven off (see `clock_skew`), node facts are
moved onto the API server's clock, which wins because it is the one clock every pod shares.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass
from typing import Any, Final

from remediator.timeline.endpoint import Endpoint
from remediator.timeline.engine_steps import EngineSteps

# Cold-start phases, in order; `total` is reported beside them.
PHASES: Final = ("scheduling", "init", "image_pull", "container_start", "engine_init",
                 "first_token")  # fmt: skip
# The states of an unfinished cold start, each named after the phase it is in.
UNFINISHED: Final = ("scheduling", "init", "image_pull", "container_start", "engine_init")
STATES: Final = (
    *UNFINISHED,
    "ready",
    "serving",
    "terminating",
    "succeeded",
    "failed",
    "deleted",
    "unknown",
)
# A skew below this is second-granular timestamps and delivery latency, not a wrong clock.
SKEW_THRESHOLD_S: Final = 2.0
_IMAGE_PULL_WAITING: Final = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"})
_MAX_LOG: Final = 32

# Kinds of log entries: (time, kind, pull's reported seconds or -1, container or "").
# STARTED is a `Started` event; RUN a container status's startedAt, which wins for the run
# that became ready (the event is written a moment after, in whole seconds).
PULLING, PULLED, PRESENT, STARTED, BACKOFF, RUN = 0, 1, 2, 3, 4, 5
_PULL_KINDS: Final = frozenset({PULLING, PULLED, PRESENT, BACKOFF})
LogEntry = tuple[float, int, float, str]  # container "" when the Event names none


def earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def latest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


def _span(end: float | None, start: float | None) -> float | None:
    # Below the skew threshold clocks differ by a second or so: never report a negative phase.
    if end is None or start is None:
        return None
    d = end - start
    return d if d > 0.0 else 0.0


# (A dataclass for its repr, equality and fields, with its own __init__: where the core is
# compiled that is native code, where the dataclass's generated one stays interpreted, ~1 µs
# per pod. The defaults are the ones set here.)
@dataclass(slots=True, init=False)
class PodTimeline:
    uid: str
    namespace: str
    name: str
    pod_seen: bool
    node: str | None
    model: str | None
    tp_size: str | None
    gpu_util: str | None
    gpus: int  # nvidia.com/gpu the engine container requests
    owner: str | None
    labels: dict[str, Any] | None
    main_container: str | None  # the engine container's name, once the spec is seen
    created: float | None
    scheduled: float | None  # PodScheduled=True
    scheduled_event: float | None  # the `Scheduled` event, when no condition was seen
    has_init: bool  # init containers (or sidecars) run before the engine
    init_started: float | None
    init_done: float | None  # Initialized=True, or every init container done
    log: list[LogEntry] | None  # the engine-side kubelet facts, de-duplicated
    # Derived from `log` and `engine` by _derive(): the cold start's own facts.
    pulling_first: float | None
    pulling_last: float | None
    pulled_last: float | None  # end of the last real pull
    pulled_synth_start: float | None  # a Pulled's time minus its reported duration
    pulls: int  # real pulls of the cold start
    present: int  # "already present on machine"
    pull_ok_last: float | None  # the latest successful pull, restarts included
    backoff_last: float | None  # the latest image pull back-off
    started_first: float | None  # the first run's start: the cold start's
    started: float | None  # the run that became ready (else the latest run)
    runs_seen: bool  # a container status showed a run: it wins over Started events
    node_first: float | None  # the earliest kubelet fact: bounds the clock skew
    ready: float | None
    first_token: float | None
    restarts: int
    waiting_reason: str | None
    waiting_at: tuple[float, int] | None  # (time, resourceVersion) of that object
    version: int  # the newest resourceVersion seen of the pod (a relist compares it)
    unschedulable: str | None
    skew_lo: float | None  # max(kubelet time − API server creation) over Events
    failed: bool
    succeeded: bool
    terminating: bool  # deletionTimestamp set
    deleted: bool
    deleted_at: float | None
    last_seen: float | None
    observed: int  # bitmask of phases already exported to histograms
    counted: str | None  # the state the tracker counts this pod in (None: not yet)
    learned: bool  # its phases went into the policy's history
    paid: bool  # the GPUs its cold start held were told to the hedge budget
    paced: int  # its engine's steps ended when the policy last learned its node's pace
    engine: EngineSteps | None  # vLLM's own init steps, when its log was read
    endpoint: Endpoint | None  # where its server answers (first-token probe)

    def __init__(self, uid: str, namespace: str, name: str) -> None:
        self.uid = uid
        self.namespace = namespace
        self.name = name
        self.pod_seen = False
        self.node = None
        self.model = None
        self.tp_size = None
        self.gpu_util = None
        self.gpus = 0
        self.owner = None
        self.labels = None
        self.main_container = None
        self.created = None
        self.scheduled = None
        self.scheduled_event = None
        self.has_init = False
        self.init_started = None
        self.init_done = None
        self.log = None
        self.pulling_first = None
        self.pulling_last = None
        self.pulled_last = None
        self.pulled_synth_start = None
        self.pulls = 0
        self.present = 0
        self.pull_ok_last = None
        self.backoff_last = None
        self.started_first = None
        self.started = None
        self.runs_seen = False
        self.node_first = None
        self.ready = None
        self.first_token = None
        self.restarts = 0
        self.waiting_reason = None
        self.waiting_at = None
        self.version = 0
        self.unschedulable = None
        self.skew_lo = None
        self.failed = False
        self.succeeded = False
        self.terminating = False
        self.deleted = False
        self.deleted_at = None
        self.last_seen = None
        self.observed = 0
        self.counted = None
        self.learned = False
        self.paid = False
        self.paced = 0
        self.engine = None
        self.endpoint = None

    # ---- facts in -------------------------------------------------------------------
    def see(self, when: float, kind: int, reported: float, container: str | None) -> None:
        entry = (when, kind, reported, container or "")
        log = self.log
        if log is None:
            log = self.log = []
        elif log and when <= log[-1][0] and entry in log:  # (sorted: a later one is new)
            return  # a resync or a count bump re-sends the same fact
        if (not log or when >= log[-1][0]) and len(log) < _MAX_LOG:
            # In time order, the usual case: the derived facts follow without a re-derive.
            log.append(entry)
            if self.node_first is None:
                self.node_first = when
            if kind in _PULL_KINDS:
                self._see_latest_pull(when, kind, reported)
            elif self._mine(entry[3]):
                if self.ready is None:
                    self._see_latest_start(when, kind)
                else:
                    self._derive_starts()
            return
        insort(log, entry)
        if len(log) > _MAX_LOG:
            self._trim(log)
        self._derive()

    def _see_latest_start(self, when: float, kind: int) -> None:
        """_derive() for an engine start later than every other fact, before Ready."""
        if self.started_first is None:
            self.started_first = when
        if kind == RUN:
            self.runs_seen = True
            self.started = when
        elif not self.runs_seen:
            self.started = when

    def _see_latest_pull(self, when: float, kind: int, reported: float) -> None:
        """_derive() for a pull fact later than every other: the same result, cheaper."""
        if kind == BACKOFF:
            self.backoff_last = when
            return
        if kind != PULLING:
            self.pull_ok_last = when
        if self.started_first is not None and when > self.started_first:
            return  # a restart's re-pull is not the cold start's
        if kind == PULLING:
            if self.pulling_first is None:
                self.pulling_first = when
            self.pulling_last = when
        elif kind == PRESENT:
            self.present += 1
        else:
            self.pulls += 1
            self.pulled_last = when
            if reported >= 0.0:
                self.pulled_synth_start = earliest(self.pulled_synth_start, when - reported)

    def set_main_container(self, name: str | None) -> None:
        self.main_container = name
        if self.log:
            self._derive()

    def see_ready(self, ready: float) -> None:
        if self.ready is None or ready < self.ready:
            self.ready = ready
            if self.log:
                self._derive_starts()

    def _trim(self, log: list[LogEntry]) -> None:
        """Bounded memory for crash loops: drop what cannot be the cold start's."""
        first = self.started_first
        if first is not None:
            log[:] = [e for e in log if e[1] in (STARTED, RUN) or e[0] <= first]
        while len(log) > _MAX_LOG:
            del log[1]  # keep the first fact and the latest ones

    def _mine(self, container: str) -> bool:
        """A start of the engine? No fieldPath: the engine's (older recorders). Before the
        spec is seen, a named container is taken as the engine; the spec decides, whatever
        the order. (Pulls of every main container count: the kubelet pulls them one after
        the other, and the engine waits.)"""
        main = self.main_container
        return not container or main is None or container == main

    def _derive(self) -> None:
        first = self._derive_starts()
        self._derive_pulls(first)

    def _derive_starts(self) -> float | None:
        log = self.log or ()
        runs: list[float] = []
        events: list[float] = []
        for when, kind, _, container in log:
            if kind in (RUN, STARTED) and self._mine(container):
                (runs if kind == RUN else events).append(when)
        first = earliest(runs[0] if runs else None, events[0] if events else None)
        started = None
        ready = self.ready
        for s in runs or events:
            if ready is None or s <= ready:
                started = s
        self.started_first, self.started = first, started if started is not None else first
        self.runs_seen = bool(runs)
        return first

    def _derive_pulls(self, first: float | None) -> None:
        p_first = p_last = pulled = synth = ok = backoff = node_first = None
        pulls = present = 0
        for when, kind, reported, _ in self.log or ():
            node_first = when if node_first is None else node_first
            if kind == BACKOFF:
                backoff = when
                continue
            if kind in (STARTED, RUN):
                continue
            if kind != PULLING:
                ok = when
            if first is not None and when > first:
                continue  # a restart's re-pull is not the cold start's
            if kind == PULLING:
                p_first = when if p_first is None else p_first
                p_last = when
            elif kind == PRESENT:
                present += 1
            else:
                pulls += 1
                pulled = when
                if reported >= 0.0:
                    synth = earliest(synth, when - reported)
        self.pulling_first, self.pulling_last, self.pulled_last = p_first, p_last, pulled
        self.pulled_synth_start, self.pulls, self.present = synth, pulls, present
        self.pull_ok_last, self.backoff_last, self.node_first = ok, backoff, node_first

    # ---- clocks -----------------------------------------------------------------------
    def clock_skew(self) -> float:
        """Seconds the node's clock runs ahead of the API server's (negative: behind), when
        proven beyond SKEW_THRESHOLD_S; else 0.

        Ahead is proven by the API server's stamps: the kubelet stamps an Event's
        firstTimestamp and the API server its creationTimestamp, and the kubelet stamps a
        status (a start, Ready) and the API server the write (`managedFields` time); neither
        is written before it happened, so kubelet time − API server time ≤ skew (`skew_lo`,
        the largest such bound). Behind is proven by order: the kubelet acts on a pod only
        after it is scheduled, so its earliest fact − scheduled ≥ skew.

        Of the skews the evidence allows, the smallest is taken: a correction may make a
        pod look younger than it is (its budget lapses a little late), never older."""
        lo = self.skew_lo
        if lo is not None and lo > SKEW_THRESHOLD_S:
            return lo
        node, init = self.node_first, self.init_started
        if init is not None and (node is None or init < node):
            node = init
        if node is None:
            return 0.0
        sched = self.scheduled if self.scheduled is not None else self.scheduled_event
        if sched is not None and node - sched < -SKEW_THRESHOLD_S:
            hi = node - sched
            return lo if lo is not None and lo < hi else hi
        return 0.0

    def _n(self, t: float | None, skew: float) -> float | None:
        """A node-clock time on the API server's clock."""
        return t - skew if t is not None and skew else t

    # ---- phases out -----------------------------------------------------------------
    def scheduled_at(self) -> float | None:
        return self.scheduled if self.scheduled is not None else self.scheduled_event

    def pull_start(self) -> float | None:
        return self.pulling_first if self.pulling_first is not None else self.pulled_synth_start

    def image_pull(self) -> float | None:
        if self.pulled_last is not None:
            return _span(self.pulled_last, self.pull_start())
        if self.present and self.pulling_first is None:
            return 0.0
        return None

    def init_end(self) -> float | None:
        """When the init containers were done (node clock): Initialized, and at the latest
        the engine's first fact (the kubelet starts the engine only after them)."""
        if not self.has_init:
            return None
        # Never after the engine's first start, whatever a later re-run of them says.
        end = self.init_done
        for bound in (self.pulling_first, self.pulled_synth_start, self.started_first):
            if bound is not None and (end is None or bound < end):
                end = bound
        return end

    def pull_end(self, skew: float = 0.0) -> float | None:
        """End of the image pull; init's end or scheduling's when nothing was pulled."""
        end = self.pulled_last if self.pulled_last is not None else self.init_end()
        if end is None:
            return self.scheduled_at()
        return end - skew if skew else end

    def started_at(self) -> float | None:
        return self.started

    def phases(self) -> dict[str, float | None]:
        sched, init, pull, start, engine, first = self.phase_values()
        return {
            "scheduling": sched,
            "init": init,
            "image_pull": pull,
            "container_start": start,
            "engine_init": engine,
            "first_token": first,
        }

    def phase_values(self, skip: int = 0) -> tuple[float | None, ...]:
        """The phases' seconds in PHASES order; those whose bit (1 << index) is set in `skip`
        are left out (None). The exporter's hot path: no dict, and the clock skew only
        worked out when a phase that needs it can be known."""
        sched = self.scheduled if self.scheduled is not None else self.scheduled_event
        skew: float | None = None
        scheduling = init = image_pull = container_start = engine_init = first_token = None
        if not skip & 1:
            scheduling = _span(sched, self.created)
        if not skip & 2 and self.has_init and sched is not None:
            end = self.init_end()
            if end is not None:
                skew = self.clock_skew()
                init = _span(end - skew if skew else end, sched)
        if not skip & 4:
            image_pull = self.image_pull()
        first = self.started_first
        if not skip & 8 and first is not None:
            if skew is None:
                skew = self.clock_skew()
            container_start = _span(first - skew if skew else first, self.pull_end(skew))
        if not skip & 16:
            engine_init = _span(self.ready, self.started)
        ready = self.ready
        if not skip & 32 and self.first_token is not None and ready is not None:
            if skew is None:
                skew = self.clock_skew()
            first_token = _span(self.first_token, ready - skew if skew else ready)
        return scheduling, init, image_pull, container_start, engine_init, first_token

    def total(self) -> float | None:
        end = self.first_token
        if end is None and self.ready is not None:
            end = self.ready - self.clock_skew()
        return _span(end, self.created)

    def state(self) -> str:
        if self.deleted:
            return "deleted"
        if self.first_token is not None:
            return "serving"
        if self.ready is not None:
            return "ready"
        if self.terminating:
            return "terminating"
        if self.succeeded:
            return "succeeded"
        if self.failed:
            return "failed"
        if not self.pod_seen and self.scheduled_at() is None and self.started is None:
            return "unknown"
        if self.started_first is not None:
            return "engine_init"
        if self.scheduled_at() is None:
            return "scheduling"
        if self.has_init and self.init_end() is None:
            return "init"
        if self._pulling_now():
            return "image_pull"
        return "container_start"

    def image_backoff(self) -> bool:
        """Backing off now: a back-off that a later successful pull ended is history."""
        b = self.backoff_last
        return b is not None and (self.pull_ok_last is None or b > self.pull_ok_last)

    def _pulling_now(self) -> bool:
        if self.waiting_reason in _IMAGE_PULL_WAITING:
            return True
        if self.backoff_last is not None and self.image_backoff():
            return True
        if self.pulling_last is None:
            return False
        return self.pulled_last is None or self.pulling_last > self.pulled_last

    def state_since(self) -> float | None:
        """When the current state began (on the API server's clock): what a phase budget
        is measured from. A pod whose engine has run counts from its first start."""
        return self.since(self.state())

    def since(self, state: str) -> float | None:
        """`state_since` of a pod in `state` (its `state()`, which the caller has just
        worked out: the policy asks for both on every step line and timer)."""
        if state == "scheduling":
            return self.created
        if state == "init":
            return self.scheduled_at()
        if state == "image_pull":
            skew = self.clock_skew()
            start = self._n(self.pull_start(), skew)
            return start if start is not None else self.pull_end(skew)
        if state == "container_start":
            return self.pull_end(self.clock_skew())
        if state == "engine_init":
            return self._n(self.started_first, self.clock_skew())
        if state == "ready":
            return self._n(self.ready, self.clock_skew())
        if state == "serving":
            return self.first_token
        return self.deleted_at if state == "deleted" else self.last_seen

    def to_json(self) -> dict[str, Any]:
        doc = {
            "kind": "timeline",
            "namespace": self.namespace,
            "pod": self.name,
            "uid": self.uid if not self.uid.startswith("?") else None,
            "node": self.node,
            "model": self.model,
            "state": self.state(),
            "restarts": self.restarts,
            "phases": self.phases(),
            "total": self.total(),
            **self._engine_json(),
        }
        skew = self.clock_skew()
        if skew:
            doc["clock_skew_s"] = round(skew, 3)
        return doc

    # ---- engine-init steps (from the pod's log) ----------------------------------------
    def engine_steps(self) -> dict[str, float]:
        if self.engine is None:
            return {}
        return self.engine.durations(self.started_at(), self.ready)

    def engine_step(self) -> str | None:
        """The vLLM step an unfinished engine init is in (None when not in engine init)."""
        if self.engine is None or self.state() != "engine_init":
            return None
        return self.engine.current(self.started_at())

    def _engine_json(self) -> dict[str, Any]:
        if self.engine is None:
            return {}
        return {
            "engine_init_steps": self.engine_steps(),
            "engine_init_step": self.engine_step(),
            "engine_init_detail": dict(sorted(self.engine.detail.items())),
        }
