"""The input kinds: one registration each, read by every place that dispatches on a kind.

A kind says how a document of it is decoded (`names` → `decoder`), which partition key its
records travel under on Kafka (everything of one pod in one partition), and whether the
cluster stamped it: `stamped` reads the newest time the API server itself stamped on a
record (not a kubelet's: see `inputs.stamps`), None for kinds the cluster stamped nothing
on (alerts and our own notes never move the clock).

    decode (document kind → decoder) · streams.keys (key) · stamps.api_server_time (stamped)

The policy engine dispatches on the record type the same way, by the rules that take it
(`policy.engine.RULES`); the tracker reads the kinds a timeline is made of. Adding an
input kind is a record in `records.py`, its decoder, one `register(...)` here, and what
reads it (docs/architecture.md, "Where each kind of change goes").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from remediator.inputs.alerts import node_of, pod_of
from remediator.inputs.events import pod_event
from remediator.inputs.otlp import engine_span
from remediator.inputs.pods import pod_seen
from remediator.inputs.records import (
    JSON,
    AlertSeen,
    EngineSpan,
    EngineStep,
    FirstToken,
    GpuVerdict,
    Input,
    PodEvent,
    PodSeen,
    Relisted,
    WatchType,
    WorkloadSeen,
)
from remediator.inputs.schema import Event, Pod
from remediator.inputs.signals import engine_log, first_token, gpu_verdict
from remediator.inputs.workloads import WORKLOAD_KINDS, workload_seen

BROADCAST = "*"  # the key of a record every partition gets (a workload: its pods are anywhere)

# (watch type, the document, its kind) → records; [] for a document that marks nothing.
Decoder = Callable[[WatchType, JSON, str], list[Input]]


@dataclass(frozen=True, slots=True)
class InputKind:
    record: type[Any]
    key: Callable[[Any], str]  # its partition key
    # The newest time the API server stamped on a record of it; None: the cluster stamped
    # nothing on this kind (its times never move the runtime's clock).
    stamped: Callable[[Any], float | None] | None
    names: tuple[str, ...] = ()  # the document kinds it is decoded from (`"kind": ...`)
    decoder: Decoder | None = None  # None: decoded by its payload's shape, or made by us
    # A kind every partition gets (`key` BROADCAST): the key of the one partition that makes
    # its decisions (the others only take it in).
    owner: Callable[[Any], str] | None = None

    @property
    def cluster_stamped(self) -> bool:
        return self.stamped is not None


KINDS: dict[type[Any], InputKind] = {}
DECODERS: dict[str, Decoder] = {}


def register(kind: InputKind) -> InputKind:
    KINDS[kind.record] = kind
    if kind.decoder is not None:
        for name in kind.names:
            DECODERS[name] = kind.decoder
    return kind


def key_of(item: Input) -> str:
    """The partition key of a record; a kind nobody registered goes under its type's name
    (one partition for all of them: seen, never a crash)."""
    kind = KINDS.get(type(item))
    return kind.key(item) if kind is not None else f"unregistered/{type(item).__name__}"


def owner_key(item: Input) -> str | None:
    """For a broadcast kind, the key of the partition that decides for it; else None."""
    kind = KINDS.get(type(item))
    return kind.owner(item) if kind is not None and kind.owner is not None else None


def cluster_stamped(item: Input) -> bool:
    kind = KINDS.get(type(item))
    return kind is not None and kind.cluster_stamped


# ---- the kinds ------------------------------------------------------------------------------
def _pod(watch: WatchType, doc: JSON, kind: str) -> list[Input]:
    return [pod_seen(watch, msgspec.convert(doc, Pod))]


def _event(watch: WatchType, doc: JSON, kind: str) -> list[Input]:
    ev = pod_event(watch, msgspec.convert(doc, Event))
    return [ev] if ev is not None else []


def _workload(watch: WatchType, doc: JSON, kind: str) -> list[Input]:
    return [workload_seen(watch, kind, doc)]


def _one(make: Callable[[JSON], Input | None]) -> Decoder:
    def decoder(watch: WatchType, doc: JSON, kind: str) -> list[Input]:
        item = make(doc)
        return [item] if item is not None else []

    return decoder


def _alert_key(item: AlertSeen) -> str:
    where = pod_of(item)
    if not isinstance(where, str):
        return "/".join(where)
    node = node_of(item)
    return f"node/{node}" if node else f"alert/{item.fingerprint}"


def _pod_key(item: PodEvent | FirstToken | EngineStep | EngineSpan) -> str:
    return f"{item.namespace}/{item.pod}"


def _pod_stamped(item: PodSeen) -> float | None:
    """Creation, the binding (PodScheduled), the last write and the deletion's request are
    the API server's; the container starts, Ready and Initialized are the kubelet's. (A
    graceful deletion writes no managedFields: without its request, the clock could still be
    short of a budget that lapsed before the pod was deleted, and the pod go unjudged.)"""
    stamps = (item.created, item.scheduled, item.written, item.deletion_asked)
    return max((t for t in stamps if t is not None), default=None)


def _created(item: PodEvent | WorkloadSeen) -> float | None:
    return item.created  # an Event's first/last/event times are the kubelet's


def _listed(item: Relisted) -> float | None:
    return item.at  # the list's Date header


register(InputKind(PodSeen, lambda p: f"{p.namespace}/{p.name}", _pod_stamped, ("Pod",), _pod))
register(InputKind(PodEvent, _pod_key, _created, ("Event",), _event))
# A workload's pods are in every partition; its image-update decision is made in one.
register(InputKind(WorkloadSeen, lambda w: BROADCAST, _created, tuple(WORKLOAD_KINDS),
                   _workload, lambda w: f"{w.namespace}/{w.kind}/{w.name}"))  # fmt: skip
register(InputKind(Relisted, lambda r: BROADCAST, _listed))  # made by the watch source
register(InputKind(AlertSeen, _alert_key, None))  # by shape: an Alertmanager payload
register(InputKind(FirstToken, _pod_key, None, ("FirstToken",), _one(first_token)))
register(InputKind(EngineStep, _pod_key, None, ("EngineLog",), _one(engine_log)))
# From serve's OTLP endpoint (inputs.otlp), stored as an EngineSpanList.
register(InputKind(EngineSpan, _pod_key, None, ("EngineSpan",), _one(engine_span)))
# A node's pods are in every partition, and each needs to know its GPU memory is unsettled
# (Decision.unsettled_node); what to tell and cordon is decided in one.
register(InputKind(GpuVerdict, lambda v: BROADCAST, None, ("GpuMemoryVerdict",),
                   _one(gpu_verdict), lambda v: f"node/{v.node}"))  # fmt: skip
