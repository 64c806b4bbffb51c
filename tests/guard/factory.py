"""Decisions for guardrail tests: a plausible stuck-pod deletion, overridable field by field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from remediator.contract.decision import Decision

T0 = 1_700_000_000.0  # a fixed virtual clock origin: 2023-11-14T22:13:20Z

DELETE = Decision(
    action="delete-pod",
    namespace="ml",
    target="vllm-0",
    reason="engine_init stuck",
    incident="inc-1",
    at=T0,
    uid="uid-0",
    workload="ml/Deployment/vllm",
    pod_created_at=T0 - 900,  # 15 min old
    expected_cold_start_s=300,
    replicas=8,
)


def make(**changes: Any) -> Decision:
    return replace(DELETE, **changes)


def notify(**changes: Any) -> Decision:
    return make(action="notify", **changes)
