"""Alertmanager alerts the policy acts on: never on `resolved`, never on a guess."""

from __future__ import annotations

from remediator.inputs.alerts import NODE_LABELS, node_of, pod_of
from remediator.inputs.records import AlertSeen

__all__ = ["NODE_LABELS", "alert_subject", "node_of", "pod_of"]


def alert_subject(alert: AlertSeen) -> str:
    return f"alert {alert.alertname} ({alert.fingerprint})"
