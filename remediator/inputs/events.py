"""Kubernetes Events (core/v1 and events.k8s.io/v1) about Pods."""

from __future__ import annotations

from remediator.inputs.kubelet import container_from_field_path
from remediator.inputs.records import InputError, PodEvent, WatchType
from remediator.inputs.schema import Event
from remediator.inputs.timefmt import parse_time

# Reasons the timeline and the policy read; other Events about Pods (Unhealthy probes,
# Killing, Created, SandboxChanged...) are dropped before their timestamps are parsed.
USED_REASONS = frozenset(
    {"Scheduled", "FailedScheduling", "Pulling", "Pulled", "Started", "BackOff", "Failed"}
)


def pod_event(watch: WatchType, ev: Event) -> PodEvent | None:
    """Normalise either Event API; None when the Event is not about a Pod or not used."""
    new_api = ev.regarding is not None and ev.involvedObject is None
    subject = ev.regarding if new_api else ev.involvedObject
    if subject is None:
        if (ev.apiVersion or "").startswith("audit.k8s.io"):
            raise InputError(
                "an audit log entry (audit.k8s.io), not a Kubernetes Event: record the "
                "watch instead (kubectl get pods,events -w -o json --output-watch-events)"
            )
        raise InputError("Event without involvedObject/regarding")
    if subject.kind != "Pod":
        return None
    namespace = subject.namespace or (ev.metadata.namespace if ev.metadata else None)
    if not namespace or not subject.name or not ev.reason:
        raise InputError("Pod Event without namespace, pod name or reason")
    if ev.reason not in USED_REASONS:
        return None
    # Typed fields are `str | None` already: parse_time (cached) without a checking wrapper.
    event_time = parse_time(ev.eventTime) if ev.eventTime else None
    if new_api:
        message, first_s, last_s = (
            ev.note or "",
            ev.deprecatedFirstTimestamp,
            ev.deprecatedLastTimestamp,
        )
        count = ev.deprecatedCount
    else:
        message, first_s, last_s = ev.message or "", ev.firstTimestamp, ev.lastTimestamp
        count = ev.count
    first = parse_time(first_s) if first_s else event_time
    last = parse_time(last_s) if last_s else None
    series = ev.series
    if series is not None:
        count = series.count or count
        observed = parse_time(series.lastObservedTime) if series.lastObservedTime else None
        if observed is not None and (last is None or observed > last):
            last = observed
    for t in (event_time, first):  # the latest time the Event carries
        if t is not None and (last is None or t > last):
            last = t
    meta = ev.metadata
    created = parse_time(meta.creationTimestamp) if meta and meta.creationTimestamp else None
    field_path = subject.fieldPath
    return PodEvent(
        watch=watch,
        pod_uid=subject.uid or None,
        namespace=namespace,
        pod=subject.name,
        reason=ev.reason,
        message=message,
        container=container_from_field_path(field_path),
        init=field_path is not None and field_path.startswith("spec.initContainers"),
        first=first if first is not None else last,
        last=last,
        count=count or 1,
        created=created,
        at=last,
    )
