"""What a rule says when it looks at an input and decides not to act."""

from __future__ import annotations

from dataclasses import dataclass

from remediator.contract.decision import Decision


@dataclass(frozen=True, slots=True)
class Ignored:
    """An input a rule looked at and let be, with why (a resolved alert, a Ready pod...)."""

    rule: str
    subject: str
    reason: str
    at: float


Outcome = Decision | Ignored
