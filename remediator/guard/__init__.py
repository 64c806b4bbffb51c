"""Guardrails: a pipeline of small pure stages between a decision and an action."""

from remediator.guard.config import GuardConfig, parse_guard_config
from remediator.guard.pipeline import ORDER, Pipeline, build_pipeline
from remediator.guard.stage import Stage, Verdict
from remediator.guard.state import GuardState, StateError, with_kill_switch

__all__ = [
    "ORDER",
    "GuardConfig",
    "GuardState",
    "Pipeline",
    "Stage",
    "StateError",
    "Verdict",
    "build_pipeline",
    "parse_guard_config",
    "with_kill_switch",
]
