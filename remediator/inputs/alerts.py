"""Alertmanager webhook payloads (version 4, including those before `fingerprint`)."""

from __future__ import annotations

import hashlib

from remediator.inputs.names import is_namespace, is_object_name
from remediator.inputs.records import JSON, AlertSeen, InputError
from remediator.inputs.timefmt import parse_time_or_none

# Alertmanager writes this for "no end yet" on firing alerts.
_ZERO_TIME = "0001-01-01T00:00:00Z"


def alerts_seen(payload: JSON) -> list[AlertSeen]:
    version = str(payload.get("version", ""))
    if version != "4":
        raise InputError(f"Alertmanager webhook version {version!r}; only version 4 is known")
    alerts = payload.get("alerts")
    if not isinstance(alerts, list):
        raise InputError("Alertmanager webhook without an alerts list")
    group_key = str(payload.get("groupKey") or "")
    return [_alert(a, group_key) for a in alerts]


def _alert(alert: JSON, group_key: str) -> AlertSeen:
    if not isinstance(alert, dict):
        raise InputError("an alert is not an object")
    status = alert.get("status")
    if status not in ("firing", "resolved"):
        raise InputError(f"alert status {status!r} is neither firing nor resolved")
    labels = {str(k): str(v) for k, v in (alert.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (alert.get("annotations") or {}).items()}
    starts = parse_time_or_none(alert.get("startsAt"))
    ends_raw = alert.get("endsAt")
    ends = None if ends_raw in (None, "", _ZERO_TIME) else parse_time_or_none(ends_raw)
    at = ends if status == "resolved" and ends is not None else starts
    return AlertSeen(
        status=status,
        alertname=labels.get("alertname", ""),
        labels=labels,
        annotations=annotations,
        starts_at=starts,
        ends_at=ends,
        fingerprint=str(alert.get("fingerprint") or _fingerprint(labels)),
        group_key=group_key,
        at=at,
    )


def _fingerprint(labels: dict[str, str]) -> str:
    """Old payloads carry no fingerprint: derive a stable one from the label set."""
    text = "\xff".join(f"{k}\xff{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


NODE_LABELS = ("node", "kubernetes_node", "Hostname", "hostname", "instance")


def pod_of(alert: AlertSeen) -> tuple[str, str] | str:
    """(namespace, pod) the alert is about, or why it names none we can trust."""
    ns, pod = alert.labels.get("namespace"), alert.labels.get("pod")
    if not ns or not pod:
        missing = " and ".join(k for k, v in (("namespace", ns), ("pod", pod)) if not v)
        return f"no {missing} label: ignored, never guessed"
    if not is_namespace(ns) or not is_object_name(pod):
        return f"labels namespace={ns!r} pod={pod!r} are not valid Kubernetes names: ignored"
    return ns, pod


def node_of(alert: AlertSeen) -> str | None:
    for key in NODE_LABELS:
        value = alert.labels.get(key)
        if value:
            host = value.split(":", 1)[0]  # `instance` is host:port
            if is_object_name(host):
                return host
    return None
