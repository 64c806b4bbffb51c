"""Kubernetes Events (core/v1 and events.k8s.io/v1) about Pods."""

from __future__ import annotations

from remediator.inputs.kubelet import container_from_field_path
from remediator.inputs.records import JSON, InputError, PodEvent, WatchType
from remediator.inputs.timefmt import parse_time_or_none


def pod_event(watch: WatchType, obj: JSON) -> PodEvent | None:
    """Normalise either Event API; None when the Event is not about a Pod."""
    new_api = "regarding" in obj and "involvedObject" not in obj
    subject = obj.get("regarding") if new_api else obj.get("involvedObject")
    if not isinstance(subject, dict):
        raise InputError("Event without involvedObject/regarding")
    if subject.get("kind") != "Pod":
        return None
    meta = obj.get("metadata") or {}
    namespace = subject.get("namespace") or meta.get("namespace")
    pod = subject.get("name")
    reason = obj.get("reason")
    if not namespace or not pod or not isinstance(reason, str):
        raise InputError("Pod Event without namespace, pod name or reason")
    series = obj.get("series") or {}
    event_time = parse_time_or_none(obj.get("eventTime"))
    if new_api:
        message = obj.get("note") or ""
        first = parse_time_or_none(obj.get("deprecatedFirstTimestamp")) or event_time
        last = parse_time_or_none(obj.get("deprecatedLastTimestamp"))
        count = series.get("count") or obj.get("deprecatedCount") or 1
    else:
        message = obj.get("message") or ""
        first = parse_time_or_none(obj.get("firstTimestamp")) or event_time
        last = parse_time_or_none(obj.get("lastTimestamp"))
        count = series.get("count") or obj.get("count") or 1
    observed = parse_time_or_none(series.get("lastObservedTime"))
    last = max(t for t in (last, observed, event_time, first, -1.0) if t is not None)
    last_or_none = last if last >= 0 else None
    return PodEvent(
        watch=watch,
        key=f"{meta.get('namespace') or namespace}/{meta.get('name') or meta.get('uid') or ''}",
        pod_uid=subject.get("uid") or None,
        namespace=namespace,
        pod=pod,
        reason=reason,
        message=message,
        container=container_from_field_path(subject.get("fieldPath")),
        first=first if first is not None else last_or_none,
        last=last_or_none,
        count=int(count),
        at=last_or_none,
    )
