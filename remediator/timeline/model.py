"""One pod's cold start, as facts that only ever narrow, and the phases derived from them.

Every fact is kept as a min or a max of what was observed, so applying the same input
twice, or inputs in any order, gives the same timeline (duplicate and out-of-order watch
events are normal). The current state is derived from the facts, never stored as a
transition, so no order of inputs can leave it illegal.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from remediator.timeline.endpoint import Endpoint
from remediator.timeline.engine_steps import EngineSteps

# Cold-start phases, in order; `total` is reported beside them.
PHASES = ("scheduling", "image_pull", "container_start", "engine_init", "first_token")
# The states of an unfinished cold start, each named after the phase it is in.
UNFINISHED = ("scheduling", "image_pull", "container_start", "engine_init")
STATES = (*UNFINISHED, "ready", "serving", "failed", "deleted", "unknown")
_IMAGE_PULL_WAITING = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull"})


def _lo(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def _hi(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


def _span(end: float | None, start: float | None) -> float | None:
    # Kubelet and API server clocks differ by up to a second: never report a negative phase.
    if end is None or start is None:
        return None
    d = end - start
    return d if d > 0.0 else 0.0


@dataclass(slots=True)
class PodTimeline:
    uid: str
    namespace: str
    name: str
    pod_seen: bool = False
    node: str | None = None
    model: str | None = None
    tp_size: str | None = None
    gpu_util: str | None = None
    owner: str | None = None
    labels: dict[str, Any] | None = None
    created: float | None = None
    scheduled: float | None = None  # PodScheduled=True
    scheduled_event: float | None = None  # the `Scheduled` event, when no condition was seen
    pulling_first: float | None = None
    pulling_last: float | None = None
    pulled_last: float | None = None  # end of the last real pull
    pulled_synth_start: float | None = None  # a Pulled's time minus its reported duration
    pulls: int = 0  # real pulls seen
    present: int = 0  # "already present on machine"
    started_first: float | None = None
    started: float | None = None  # the run that is (or became) ready
    started_event: float | None = None  # a `Started` event: stands in until the pod shows
    ready: float | None = None
    first_token: float | None = None
    restarts: int = 0
    waiting_reason: str | None = None
    unschedulable: str | None = None
    image_backoff: bool = False
    failed: bool = False
    deleted: bool = False
    deleted_at: float | None = None
    last_seen: float | None = None
    observed: int = 0  # bitmask of phases already exported to histograms
    counted: str | None = None  # the state the tracker counts this pod in (None: not yet)
    engine: EngineSteps | None = None  # vLLM's own init steps, when its log was read
    endpoint: Endpoint | None = None  # where its server answers (first-token probe)

    # ---- facts in -------------------------------------------------------------------
    def see_started(self, started: float) -> None:
        self.started_first = _lo(self.started_first, started)
        if self.ready is None or started <= self.ready:
            self.started = _hi(self.started, started)

    def see_ready(self, ready: float) -> None:
        self.ready = _lo(self.ready, ready)
        if self.started is not None and self.started > ready:
            # A start seen earlier was a later restart's: fall back to the first run's.
            first = self.started_first
            self.started = first if first is not None and first <= ready else None

    def see_pulling(self, first: float) -> None:
        if self.started_first is not None and first > self.started_first:
            return  # a re-pull after the container ran belongs to a restart, not the cold start
        self.pulling_first = _lo(self.pulling_first, first)
        self.pulling_last = _hi(self.pulling_last, first)

    def see_pulled(self, first: float, reported: float | None, present: bool) -> None:
        if self.started_first is not None and first > self.started_first:
            return
        if present:
            self.present += 1
            return
        self.pulls += 1
        self.pulled_last = _hi(self.pulled_last, first)
        if reported is not None:
            self.pulled_synth_start = _lo(self.pulled_synth_start, first - reported)

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

    def pull_end(self) -> float | None:
        """End of the image pull; scheduling's end when nothing was pulled."""
        if self.pulled_last is not None:
            return self.pulled_last
        return self.scheduled_at()

    def started_at(self) -> float | None:
        return self.started if self.started is not None else self.started_event

    def phases(self) -> dict[str, float | None]:
        started = self.started_at()
        first = self.started_first if self.started_first is not None else started
        return {
            "scheduling": _span(self.scheduled_at(), self.created),
            "image_pull": self.image_pull(),
            "container_start": _span(first, self.pull_end()),
            "engine_init": _span(self.ready, started),
            "first_token": _span(self.first_token, self.ready),
        }

    def total(self) -> float | None:
        end = self.first_token if self.first_token is not None else self.ready
        return _span(end, self.created)

    def state(self) -> str:
        if self.deleted:
            return "deleted"
        if self.first_token is not None:
            return "serving"
        if self.ready is not None:
            return "ready"
        if self.failed:
            return "failed"
        if not self.pod_seen and self.scheduled_at() is None and self.started_at() is None:
            return "unknown"
        if self.started_at() is not None:
            return "engine_init"
        if self.scheduled_at() is None:
            return "scheduling"
        if self._pulling_now():
            return "image_pull"
        return "container_start"

    def _pulling_now(self) -> bool:
        if self.waiting_reason in _IMAGE_PULL_WAITING or self.image_backoff:
            return True
        if self.pulling_last is None:
            return False
        return self.pulled_last is None or self.pulling_last > self.pulled_last

    def state_since(self) -> float | None:
        """When the current state began: what a phase budget is measured from."""
        state = self.state()
        if state == "scheduling":
            return self.created
        if state == "image_pull":
            return self.pull_start() or self.scheduled_at()
        if state == "container_start":
            return self.pull_end()
        if state == "engine_init":
            return self.started_at()
        if state == "ready":
            return self.ready
        if state == "serving":
            return self.first_token
        return self.deleted_at if state == "deleted" else self.last_seen

    def to_json(self) -> dict[str, Any]:
        return {
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


def timeline_size(t: PodTimeline) -> int:
    """Bytes held by one timeline (object plus the floats and strings it owns alone)."""
    size = sys.getsizeof(t)
    for name in PodTimeline.__slots__:
        v = getattr(t, name)
        if isinstance(v, float):
            size += sys.getsizeof(v)
    return size + sys.getsizeof(t.uid) + sys.getsizeof(t.name)
