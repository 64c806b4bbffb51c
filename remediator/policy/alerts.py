"""Alertmanager alerts the policy acts on: never on `resolved`, never on a guess."""

from __future__ import annotations

from remediator.inputs.records import AlertSeen
from remediator.policy.names import is_namespace, is_object_name

NODE_LABELS = ("node", "kubernetes_node", "Hostname", "hostname", "instance")


def alert_subject(alert: AlertSeen) -> str:
    return f"alert {alert.alertname} ({alert.fingerprint})"


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
