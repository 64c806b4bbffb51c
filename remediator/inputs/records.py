"""The small typed records every raw input is normalised into.

A record keeps references into the decoded JSON where copying would cost time on the
hot path (labels, the pod spec), and is otherwise flat: strings, floats, ints. Records
are frozen msgspec structs: built in C, about six times cheaper than a frozen dataclass,
which matters at one record per watch event. Each kind is final: the core tells them apart
by `type(item) is Kind`, a pointer compare (an `isinstance` on a msgspec struct's class asks
its metaclass, ~0.2 µs per check, several per input).
"""

from __future__ import annotations

from typing import Any, Literal, final

import msgspec

from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.schema import ContainerStatus, PodSpec

WatchType = Literal["ADDED", "MODIFIED", "DELETED"]
JSON = dict[str, Any]


@final
class PodSeen(msgspec.Struct, frozen=True, gc=False):
    """A Pod as a watch event (or a list item) shows it."""

    watch: WatchType
    uid: str
    namespace: str
    name: str
    created: float | None
    node: str | None
    phase: str | None  # Pending | Running | Succeeded | Failed | Unknown
    scheduled: float | None  # PodScheduled=True lastTransitionTime
    unschedulable: str | None  # PodScheduled=False message (e.g. Insufficient nvidia.com/gpu)
    ready: float | None  # Ready=True lastTransitionTime
    initialized: float | None  # Initialized=True lastTransitionTime: init containers done
    statuses: list[ContainerStatus] | None  # which one is the engine is the timeline's call
    init_statuses: list[ContainerStatus] | None
    deleting: bool  # deletionTimestamp set: terminating
    labels: dict[str, str]
    spec: PodSpec  # parsed once per pod by the timeline (see inputs.pods.spec_info)
    owner: str | None  # "Kind/name" of the controller
    version: int  # metadata.resourceVersion when numeric (etcd's revision), else 0
    at: float | None
    pod_ip: str | None = None  # status.podIP: where a first-token probe connects
    # Two clocks (see inputs.stamps): when the API server last wrote the object (the newest
    # managedFields time: its clock), and the newest time the kubelet stamped (the node's).
    written: float | None = None
    node_latest: float | None = None
    # When its deletion was asked for (deletionTimestamp − its grace period): the API server's
    # clock at that moment, so the cluster's time is known to have reached it.
    deletion_asked: float | None = None


@final
class PodEvent(msgspec.Struct, frozen=True, gc=False):
    """A core/v1 or events.k8s.io/v1 Event whose subject is a Pod."""

    watch: WatchType
    pod_uid: str | None
    namespace: str
    pod: str
    reason: str
    message: str
    container: str | None  # from fieldPath: spec.containers{vllm} → vllm
    init: bool  # fieldPath spec.initContainers{...}: an init container (or sidecar)
    first: float | None
    last: float | None
    count: int
    created: float | None  # metadata.creationTimestamp: the API server's clock
    at: float | None


@final
class WorkloadSeen(msgspec.Struct, frozen=True, gc=False):
    """A Deployment, StatefulSet or DaemonSet."""

    watch: WatchType
    kind: str
    uid: str
    namespace: str
    name: str
    generation: int
    observed_generation: int
    replicas: int | None  # desired (spec.replicas; DaemonSet: desiredNumberScheduled)
    ready_replicas: int
    updated_replicas: int
    images: tuple[str, ...]  # pod template images, init containers first
    main_image: str | None  # the GPU container's image (else the first container's)
    model: str | None
    labels: JSON
    template_labels: JSON
    at: float | None
    created: float | None = None  # metadata.creationTimestamp: the API server's clock
    pods: int | None = None  # a Deployment's status.replicas: its pods of every ReplicaSet
    paused: bool = False  # a Deployment's spec.paused
    gpus: int = 0  # nvidia.com/gpu of the template's GPU container: what each pod needs
    # A Deployment's hedges running (the hedge step's annotation, inputs/hedge_annotation.py):
    # each one's stalled pod, the pods from before its surge, its deadline, its racer.
    hedges: tuple[Hedge, ...] = ()


@final
class AlertSeen(msgspec.Struct, frozen=True, gc=False):
    """One alert of an Alertmanager webhook (version 4)."""

    status: Literal["firing", "resolved"]
    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float | None
    ends_at: float | None
    fingerprint: str
    group_key: str
    at: float | None


@final
class FirstToken(msgspec.Struct, frozen=True, gc=False):
    """The engine answered its first request (from a probe, a log line or a sidecar)."""

    namespace: str
    pod: str
    uid: str | None
    at: float


@final
class EngineStep(msgspec.Struct, frozen=True, gc=False):
    """A vLLM start-up log line that marks an engine-init step (see inputs.vllm_log), stamped
    with the kubelet's time for the line. Lines that mark nothing never become inputs.
    `logged`: vLLM's own clock in the line, read as UTC; `reprint`: Ray's late copy of lines
    other workers wrote at `logged` (in the container's zone)."""

    namespace: str
    pod: str
    uid: str | None
    step: str
    reported_s: float | None
    detail: str | None
    at: float
    logged: float | None = None
    reprint: bool = False


@final
class EngineSpan(msgspec.Struct, frozen=True, gc=False):
    """A vLLM start-up span (OpenTelemetry, received over OTLP: see inputs.otlp), attributed
    to its pod by the span's resource (`k8s.namespace.name`, `k8s.pod.name`, `k8s.pod.uid`).
    Only spans that mark an engine-init step become inputs (inputs.vllm_spans). Its times
    are the engine's process clock, the node's, as the kubelet's stamps on log lines are:
    `started` and `at` (the end, when the span was exported) in seconds."""

    namespace: str
    pod: str
    uid: str | None
    name: str  # vLLM's span name: "Load model", "Compile graph", "Capture model", ...
    started: float
    at: float
    trace_id: str = ""  # hex, as OTLP/JSON writes it
    span_id: str = ""


@final
class GpuVerdict(msgspec.Struct, frozen=True, gc=False):
    """The outcome of a GPU memory verification on one node."""

    node: str
    stable: bool
    detail: str
    incident: str | None
    at: float | None


@final
class Relisted(msgspec.Struct, frozen=True, gc=False):
    """A (re)list of one kind in one namespace is complete: what it did not hold is gone.

    The watch source sends it after the last page of every list, so objects deleted while
    the watch was away (a 410, a cut) leave the tracker instead of lingering as stuck."""

    kind: str  # Pod, Event, Deployment, StatefulSet, DaemonSet
    namespace: str
    uids: frozenset[str]  # every object the list held
    version: int  # the list's resourceVersion when numeric, else 0
    selector: str | None  # the list's field selector: it covers only what matches
    at: float | None  # the API server's time of the list (its Date header), when known

    def covers(self, name: str) -> bool:
        """Whether the list would have held an object of this name (in its namespace): a
        `metadata.name=X` selector covers X only; a selector of another form, nothing (a
        relist never guesses what it did not see)."""
        if not self.selector:
            return True
        key, sep, value = self.selector.partition("=")
        return bool(sep) and key == "metadata.name" and value.lstrip("=") == name


Input = (
    PodSeen
    | PodEvent
    | WorkloadSeen
    | AlertSeen
    | FirstToken
    | EngineStep
    | EngineSpan
    | GpuVerdict
    | Relisted
)


class InputError(ValueError):
    """Bad input from outside (the cluster, Alertmanager, a file): the line is skipped,
    never guessed at. Our own bugs raise anything else."""
