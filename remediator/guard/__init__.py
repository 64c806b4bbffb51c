"""Guardrails: a pipeline of small pure stages between a decision and an action."""

from remediator.guard.config import GuardConfig
from remediator.guard.kill_switch import engage
from remediator.guard.pipeline import ORDER, STAGES, Pipeline, build_pipeline, parse_guardrails
from remediator.guard.stage import Stage, Verdict
from remediator.guard.state import GuardState, StateError
from remediator.guard.watch_current import hold

__all__ = [
    "ORDER",
    "STAGES",
    "GuardConfig",
    "GuardState",
    "Pipeline",
    "Stage",
    "StateError",
    "Verdict",
    "build_pipeline",
    "engage",
    "hold",
    "parse_guardrails",
]
