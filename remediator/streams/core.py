"""The core as the Kafka runtime runs it: per input partition, then once for the cluster.

Pure: no Faust, no sockets, no clock. The Faust app (`streams.app`) moves records
between topics and tables; everything it decides is decided here, by the same
`Session`, policy engine and guard pipeline the embedded runtime and replay run.

    inputs topic (N partitions, by pod) ── PartitionCore ──▶ candidates topic (1 partition)
                                                                     │
                                commands topic ◀── GuardCore (ordered by time) ◀┘

A partition's clock is its stream time: the largest input time it has seen, moved
on by tick records the ingest (or a worker) sends to every partition. After a tick
the partition reports a watermark: every candidate it will ever emit at or before
that time has been emitted. The guard releases candidates in time order up to the
smallest watermark of all partitions, so the cluster-wide guardrails (rate limit,
blast radius, cooldown per workload) see decisions in the same order as one
embedded process would, however the partitions are spread over workers.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.guard.pipeline import build_pipeline
from remediator.guard.state import GuardState
from remediator.inputs.decode import decode
from remediator.inputs.records import WorkloadSeen
from remediator.policy.history import PhaseHistory, expected_cold_start
from remediator.policy.outcome import Ignored, Outcome
from remediator.policy_file import PolicyFile
from remediator.runtime.outbox import decision_from_json
from remediator.session import Session, Sink
from remediator.streams.keys import owner, workload_owner_key
from remediator.timeline.tracker import StateChange


def decision_to_json(d: Decision) -> str:
    """What `outbox.decision_from_json` reads, by orjson (dataclasses natively, no asdict)."""
    return orjson.dumps(d).decode()


# Internal records share the input topic with raw documents; they start with this.
INTERNAL = b'{"remediator":'


def tick_record(at: float) -> bytes:
    return orjson.dumps({"remediator": "tick", "at": at})


def retry_record(held: Suppressed) -> bytes:
    """A guardrail's "not yet", back to the decision's partition: look again at `not_before`."""
    d = held.decision
    doc = {"remediator": "retry", "at": d.at, "decision": decision_to_json(d)}
    doc["not_before"] = held.retry_at if held.retry_at is not None else d.at
    return orjson.dumps(doc)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A decision the policy made, before the guardrails; `partition` is where it came from,
    `model` the target pod's model (the guard weighs its cluster-wide cold start)."""

    decision: Decision
    at: float
    partition: int
    model: str | None = None

    def to_json(self) -> bytes:
        doc = {"kind": "candidate", "at": self.at, "partition": self.partition}
        doc |= {"model": self.model, "decision": decision_to_json(self.decision)}
        return orjson.dumps(doc)


@dataclass(frozen=True, slots=True)
class Learned:
    """A finished cold start's phase durations: what the guard's history learns from."""

    at: float
    partition: int
    samples: tuple[tuple[str, str, float], ...]  # (model, phase, seconds)

    def to_json(self) -> bytes:
        doc = {"kind": "learned", "at": self.at, "partition": self.partition}
        return orjson.dumps({**doc, "samples": [list(x) for x in self.samples]})


@dataclass(frozen=True, slots=True)
class Watermark:
    partition: int
    at: float

    def to_json(self) -> bytes:
        return orjson.dumps({"kind": "watermark", "partition": self.partition, "at": self.at})


GuardRecord = Candidate | Learned | Watermark


def parse_guard_record(raw: bytes) -> GuardRecord:
    doc = orjson.loads(raw)
    at, partition = float(doc["at"]), int(doc["partition"])
    if doc["kind"] == "watermark":
        return Watermark(partition, at)
    if doc["kind"] == "learned":
        samples = tuple((str(m), str(p), float(s)) for m, p, s in doc["samples"])
        return Learned(at, partition, samples)
    return Candidate(decision_from_json(doc["decision"]), at, partition, doc.get("model"))


class _Collect:
    """The session's sink: outcomes go out as candidates, guarding happens downstream."""

    def __init__(self) -> None:
        self.out: list[tuple[Decision, float]] = []
        self.dropped: list[Ignored] = []

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:  # pragma: no cover - never guarded here
        raise AssertionError("a partition does not guard")

    def suppressed(self, suppressed: Suppressed) -> None:  # pragma: no cover
        raise AssertionError("a partition does not guard")

    def ignored(self, ignored: Ignored) -> None:
        self.dropped.append(ignored)


class _UnguardedSession(Session):
    """The session with its last step (the guard pipeline) moved to the guard agent:
    what would be settled here is handed on with the time it was decided at."""

    def _settle(self, outcome: Outcome, now: float, out: Sink) -> None:
        if isinstance(outcome, Ignored):
            out.ignored(outcome)
            return
        assert isinstance(out, _Collect)
        out.out.append((outcome, now))


class _RecordingHistory(PhaseHistory):
    """The partition's history, which also keeps what it learned for the guard."""

    def __init__(self, window: int) -> None:
        super().__init__(window)
        self.fresh: list[tuple[str, str, float]] = []

    def add(self, model: str, phase: str, seconds: float) -> None:
        super().add(model, phase, seconds)
        self.fresh.append((model, phase, seconds))


class PartitionCore:
    """Timelines, incidents and timers of the pods of one input partition."""

    def __init__(
        self, config: PolicyFile, partition: int, partitions: int, registry: CollectorRegistry
    ) -> None:
        self.partition = partition
        self.partitions = partitions
        self.session = _UnguardedSession(config, registry)
        self.history = _RecordingHistory(config.rules.stuck_pod.adaptive.window)
        self.session.engine.history = self.history
        self.ignored = 0

    @property
    def now(self) -> float:
        return self.session.now

    def feed(self, raw: bytes) -> list[Candidate | Learned]:
        """One record of the input topic: a raw document or an internal record."""
        sink = _Collect()
        if raw.startswith(INTERNAL):
            self._internal(orjson.loads(raw), sink)
        else:
            for item in decode(raw):
                mine = not isinstance(item, WorkloadSeen) or self._owns(item)
                before = len(sink.out)
                self.session.feed(item, sink)
                if not mine:  # a broadcast workload: its own decision is another's to make
                    del sink.out[before:]
        self.ignored += len(sink.dropped)
        out: list[Candidate | Learned] = []
        if self.history.fresh:
            fresh, self.history.fresh = self.history.fresh, []
            out.append(Learned(self.session.now, self.partition, tuple(fresh)))
        out.extend(Candidate(d, at, self.partition, self._model(d)) for d, at in sink.out)
        return out

    def _model(self, d: Decision) -> str | None:
        t = self.session.tracker.get(d.uid) if d.uid else None
        return t.model if t is not None else None

    def _owns(self, item: WorkloadSeen) -> bool:
        return owner(workload_owner_key(item), self.partitions) == self.partition

    def _internal(self, doc: dict[str, Any], sink: _Collect) -> None:
        at = float(doc["at"])
        if doc["remediator"] == "retry":
            decision = decision_from_json(doc["decision"])
            not_before = float(doc.get("not_before", at))
            self.session.engine.retry_later(decision, at, not_before)
            # Its due time may be behind this partition's clock already: fire it now.
            for due, outcome in self.session.engine.advance(self.session.now):
                self.session._settle(outcome, max(due, at), sink)
            return
        self.session.advance(at, sink)


@dataclass
class GuardCore:
    """The cluster-wide guardrails over candidates from every partition, in time order.

    It also keeps the cluster-wide history of cold starts (each partition learns from its
    own pods only) and weighs each decision's expected cold start by it, as one process
    would."""

    config: PolicyFile
    partitions: int
    state: GuardState = field(default_factory=GuardState)
    # (at, 0 = learned | 1 = candidate, payload, origin partition), a heap
    pending: list[tuple[float, int, str, int]] = field(default_factory=list)
    watermarks: dict[int, float] = field(default_factory=dict)
    clock: float = -math.inf  # the latest time the guardrails judged at; never goes back
    # the history's samples, "model\nphase" -> the last `window` of them
    learned: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pipeline = build_pipeline(self.config.guardrails)
        self.history = PhaseHistory(self.config.rules.stuck_pod.adaptive.window)
        for key, samples in self.learned.items():
            model, phase = key.split("\n", 1)
            for seconds in samples:
                self.history.add(model, phase, seconds)

    @property
    def frontier(self) -> float:
        """Every partition has emitted all its candidates up to this time."""
        if len(self.watermarks) < self.partitions:
            return -math.inf
        return min(self.watermarks.values())

    def take(self, record: GuardRecord) -> list[tuple[Decision | Suppressed, int]]:
        """A record from the candidates topic; what the guardrails said, oldest first,
        each with the partition the decision came from."""
        if isinstance(record, Watermark):
            if record.at > self.watermarks.get(record.partition, -math.inf):
                self.watermarks[record.partition] = record.at
        elif isinstance(record, Learned):
            # Before the candidates of its instant: the pod was ready when they were made.
            payload = orjson.dumps([list(s) for s in record.samples]).decode()
            heapq.heappush(self.pending, (record.at, 0, payload, record.partition))
        else:
            payload = orjson.dumps([record.model, decision_to_json(record.decision)]).decode()
            heapq.heappush(self.pending, (record.at, 1, payload, record.partition))
        return self._release()

    def _release(self) -> list[tuple[Decision | Suppressed, int]]:
        frontier = self.frontier
        out: list[tuple[Decision | Suppressed, int]] = []
        while self.pending and self.pending[0][0] <= frontier:
            at, kind, payload, origin = heapq.heappop(self.pending)
            if kind == 0:
                self._learn(orjson.loads(payload))
                continue
            model, text = orjson.loads(payload)
            d = self._weigh(decision_from_json(text), model)
            # A late candidate (a retry that came back after its partition ran ahead) is
            # judged now, not in the past the guard state has already moved beyond.
            self.clock = max(self.clock, at)
            result, self.state = self.pipeline.run(d, self.clock, self.state)
            out.append((result, origin))
        return out

    def _learn(self, samples: list[list[Any]]) -> None:
        window = self.config.rules.stuck_pod.adaptive.window
        for model, phase, seconds in samples:
            self.history.add(model, phase, seconds)
            kept = self.learned.setdefault(f"{model}\n{phase}", [])
            kept.append(seconds)
            del kept[:-window]

    def _weigh(self, d: Decision, model: str | None) -> Decision:
        """What a cold start of the pod's model takes, over every partition's pods."""
        if d.expected_cold_start_s is None:
            return d
        cold = expected_cold_start(self.config.rules.stuck_pod, self.history, model)
        return replace(d, expected_cold_start_s=cold)

    @staticmethod
    def retryable(result: Decision | Suppressed) -> bool:
        return isinstance(result, Suppressed) and result.retry_at is not None

    # ---- the table's value ------------------------------------------------------------
    def to_json(self) -> str:
        return orjson.dumps(
            {
                "state": self.state.to_json(),
                "pending": [list(p) for p in self.pending],
                "watermarks": {str(k): v for k, v in self.watermarks.items()},
                "learned": self.learned,
                "clock": self.clock if math.isfinite(self.clock) else None,
            }
        ).decode()

    @classmethod
    def from_json(cls, config: PolicyFile, partitions: int, text: str) -> GuardCore:
        doc = json.loads(text)
        learned = {str(k): [float(x) for x in v] for k, v in doc.get("learned", {}).items()}
        state = build_pipeline(config.guardrails).load_state(doc["state"])
        core = cls(config, partitions, state, learned=learned)
        core.pending = [(float(a), int(k), str(t), int(p)) for a, k, t, p in doc["pending"]]
        heapq.heapify(core.pending)
        core.watermarks = {int(k): float(v) for k, v in doc["watermarks"].items()}
        core.clock = -math.inf if doc.get("clock") is None else float(doc["clock"])
        return core
