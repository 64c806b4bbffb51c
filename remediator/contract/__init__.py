"""The core's contract, below both `policy` and `guard`: decisions, what a guardrail
says when it says no, the table of actions, and configuration errors."""

from remediator.contract.actions import ACTIONS, ActionSpec, action
from remediator.contract.decision import Action, Decision, Suppressed
from remediator.contract.errors import ConfigError

__all__ = ["ACTIONS", "Action", "ActionSpec", "ConfigError", "Decision", "Suppressed", "action"]
