"""Event objects about a pod: core/v1 (`involvedObject`, `count`) and events.k8s.io/v1
(`regarding`, `note`, `eventTime`, `series`), as the kubelet and scheduler record them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tests.simstream.forms import micro_time, rfc3339
from tests.simstream.plan import PodPlan

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One recorded event: `count` > 1 is a repeat of the same Event object."""

    reason: str
    message: str
    first_us: int  # microseconds since the epoch
    last_us: int
    count: int
    component: str  # kubelet | default-scheduler
    container: str | None  # the fieldPath's container
    warning: bool = False


def event_object(p: PodPlan, ev: Occurrence, resource_version: int) -> JSON:
    """The Event as the watch of its API group shows it."""
    return _new_api(p, ev, resource_version) if p.new_events_api else _core(p, ev, resource_version)


def _name(p: PodPlan, ev: Occurrence) -> str:
    # The recorder names an Event `<object>.<hex unix nanos of the first occurrence>`.
    return f"{p.name}.{ev.first_us * 1000 + len(ev.reason):x}"


def _subject(p: PodPlan, ev: Occurrence) -> JSON:
    subject: JSON = {"kind": "Pod", "namespace": p.namespace, "name": p.name, "uid": p.uid,
                     "apiVersion": "v1", "resourceVersion": str(100 + p.index)}  # fmt: skip
    if ev.container:
        subject["fieldPath"] = f"spec.containers{{{ev.container}}}"
    return subject


def _host(p: PodPlan, ev: Occurrence) -> str:
    return p.node or "" if ev.component == "kubelet" else ""


def _core(p: PodPlan, ev: Occurrence, rv: int) -> JSON:
    # The scheduler records through events.k8s.io (eventTime set, timestamps empty);
    # the kubelet through the legacy recorder (timestamps set, eventTime null).
    scheduler = ev.component == "default-scheduler"
    source: JSON = {"component": ev.component}
    if not scheduler:
        source["host"] = _host(p, ev)
    obj: JSON = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": _name(p, ev),
            "namespace": p.namespace,
            "uid": _event_uid(p, ev),
            "resourceVersion": str(rv),
            "creationTimestamp": rfc3339(ev.first_us // 1_000_000),
        },  # fmt: skip
        "involvedObject": _subject(p, ev),
        "reason": ev.reason,
        "message": ev.message,
        "source": source,
        "firstTimestamp": None if scheduler else rfc3339(ev.first_us // 1_000_000),
        "lastTimestamp": None if scheduler else rfc3339(ev.last_us // 1_000_000),
        "count": ev.count,
        "type": "Warning" if ev.warning else "Normal",
        "eventTime": micro_time(ev.first_us) if scheduler else None,
        "reportingComponent": ev.component,
        "reportingInstance": _host(p, ev),
    }
    if scheduler:
        obj["action"] = "Binding" if ev.reason == "Scheduled" else "Scheduling"
        if ev.count > 1:
            obj["series"] = {"count": ev.count, "lastObservedTime": micro_time(ev.last_us)}
    return obj


def _new_api(p: PodPlan, ev: Occurrence, rv: int) -> JSON:
    scheduler = ev.component == "default-scheduler"
    obj: JSON = {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {
            "name": _name(p, ev),
            "namespace": p.namespace,
            "uid": _event_uid(p, ev),
            "resourceVersion": str(rv),
            "creationTimestamp": rfc3339(ev.first_us // 1_000_000),
        },  # fmt: skip
        "eventTime": micro_time(ev.first_us) if scheduler else None,
        "reportingController": ev.component,
        "reportingInstance": _host(p, ev),
        "action": ev.reason,
        "reason": ev.reason,
        "regarding": _subject(p, ev),
        "note": ev.message,
        "type": "Warning" if ev.warning else "Normal",
    }
    if scheduler:
        if ev.count > 1:
            obj["series"] = {"count": ev.count, "lastObservedTime": micro_time(ev.last_us)}
    else:
        # Legacy-recorded (kubelet) Events seen through events.k8s.io keep their timestamps here.
        obj["deprecatedSource"] = {"component": ev.component, "host": _host(p, ev)}
        obj["deprecatedFirstTimestamp"] = rfc3339(ev.first_us // 1_000_000)
        obj["deprecatedLastTimestamp"] = rfc3339(ev.last_us // 1_000_000)
        obj["deprecatedCount"] = ev.count
    return obj


def _event_uid(p: PodPlan, ev: Occurrence) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{p.namespace}/{_name(p, ev)}"))
