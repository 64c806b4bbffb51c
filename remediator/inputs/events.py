"""Kubernetes Events (core/v1 and events.k8s.io/v1) about Pods."""

from __future__ import annotations

from remediator.inputs.kubelet import container_from_field_path
from remediator.inputs.records import InputError, PodEvent, WatchType
from remediator.inputs.schema import Event
from remediator.inputs.timefmt import parse_time_or_none

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
        raise InputError("Event without involvedObject/regarding")
    if subject.kind != "Pod":
        return None
    namespace = subject.namespace or (ev.metadata.namespace if ev.metadata else None)
    if not namespace or not subject.name or not ev.reason:
        raise InputError("Pod Event without namespace, pod name or reason")
    if ev.reason not in USED_REASONS:
        return None
    event_time = parse_time_or_none(ev.eventTime)
    if new_api:
        message = ev.note or ""
        first = parse_time_or_none(ev.deprecatedFirstTimestamp) or event_time
        last = parse_time_or_none(ev.deprecatedLastTimestamp)
        count = ev.deprecatedCount
    else:
        message = ev.message or ""
        first = parse_time_or_none(ev.firstTimestamp) or event_time
        last = parse_time_or_none(ev.lastTimestamp)
        count = ev.count
    series = ev.series
    if series is not None:
        count = series.count or count
        observed = parse_time_or_none(series.lastObservedTime)
        if observed is not None and (last is None or observed > last):
            last = observed
    for t in (event_time, first):  # the latest time the Event carries
        if t is not None and (last is None or t > last):
            last = t
    return PodEvent(
        watch=watch,
        pod_uid=subject.uid or None,
        namespace=namespace,
        pod=subject.name,
        reason=ev.reason,
        message=message,
        container=container_from_field_path(subject.fieldPath),
        first=first if first is not None else last,
        last=last,
        count=count or 1,
        at=last,
    )
