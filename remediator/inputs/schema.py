"""The fields of Kubernetes objects the core reads, as msgspec structs.

Decoding a watch line straight into these parses only what is declared and skips the rest
of a 6 KB Pod (managedFields, volumes, probes, env) without building Python objects for
it: that is what keeps the hot path near the cost of bare JSON parsing. Every field has a
default, so a sparse or partial object decodes; a field of the wrong type is a
`msgspec.ValidationError` naming its path (`$.object.metadata.uid`).

`gc=False`: decoded JSON holds no reference cycles, so the garbage collector need not track
the dozens of structs each line makes (fewer and cheaper collections on the hot path).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct


class OwnerRef(Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class ManagedField(Struct, gc=False):
    """Only its time: when the API server applied this manager's latest change (its clock)."""

    time: str | None = None


class ObjectMeta(Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    deletionGracePeriodSeconds: int | None = None
    labels: dict[str, str] | None = None
    ownerReferences: list[OwnerRef] | None = None
    managedFields: list[ManagedField] | None = None


class Condition(Struct, gc=False):
    type: str = ""
    status: str = ""
    lastTransitionTime: str | None = None
    reason: str | None = None
    message: str | None = None


class Running(Struct, gc=False):
    startedAt: str | None = None


class Waiting(Struct, gc=False):
    reason: str | None = None


class Terminated(Struct, gc=False):
    startedAt: str | None = None
    finishedAt: str | None = None
    exitCode: int | None = None


class ContainerState(Struct, gc=False):
    running: Running | None = None
    waiting: Waiting | None = None
    terminated: Terminated | None = None


class ContainerStatus(Struct, gc=False):
    name: str = ""
    restartCount: int = 0
    state: ContainerState | None = None
    lastState: ContainerState | None = None  # the previous run, after a restart


class PodStatus(Struct, gc=False):
    phase: str | None = None
    podIP: str | None = None
    conditions: list[Condition] | None = None
    containerStatuses: list[ContainerStatus] | None = None
    initContainerStatuses: list[ContainerStatus] | None = None


class Resources(Struct, gc=False):
    limits: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None


class Container(Struct, gc=False):
    name: str = ""
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    resources: Resources | None = None
    restartPolicy: str | None = None  # "Always" on an init container: a sidecar (1.29+)


class PodSpec(Struct, gc=False):
    nodeName: str | None = None
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None


class Pod(Struct, tag="Pod", tag_field="kind", gc=False):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class ObjectRef(Struct, gc=False):
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    fieldPath: str | None = None


class EventSeries(Struct, gc=False):
    count: int | None = None
    lastObservedTime: str | None = None


class Event(Struct, tag="Event", tag_field="kind", gc=False):
    """core/v1 and events.k8s.io/v1 Events in one: their fields do not collide."""

    apiVersion: str | None = None  # audit.k8s.io Events share the kind: told apart here
    metadata: ObjectMeta | None = None
    involvedObject: ObjectRef | None = None  # core/v1
    regarding: ObjectRef | None = None  # events.k8s.io/v1
    reason: str | None = None
    message: str | None = None  # core/v1
    note: str | None = None  # events.k8s.io/v1
    firstTimestamp: str | None = None
    lastTimestamp: str | None = None
    deprecatedFirstTimestamp: str | None = None
    deprecatedLastTimestamp: str | None = None
    eventTime: str | None = None
    count: int | None = None
    deprecatedCount: int | None = None
    series: EventSeries | None = None


class PodWatch(Struct, gc=False):
    """A watch line whose object is a Pod or an Event: the hot path's one decode."""

    type: str
    object: Pod | Event


POD_WATCH = msgspec.json.Decoder(PodWatch)
