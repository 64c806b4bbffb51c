from __future__ import annotations

from typing import Any

import orjson
import pytest

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.decode import normalize
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile, load_policy
from remediator.session import Session
from remediator.timeline.tracker import StateChange


class Run:
    def __init__(self, config: PolicyFile, keeps_learned: bool = False) -> None:
        self.session = Session(config, keeps_learned=keeps_learned)
        self.decisions: list[Decision] = []
        self.held: list[Suppressed] = []
        self.notes: list[Ignored] = []

    # the Sink protocol
    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        self.held.append(suppressed)

    def ignored(self, ignored: Ignored) -> None:
        self.notes.append(ignored)

    def feed(self, *docs: dict[str, Any]) -> Run:
        for doc in docs:
            for item in normalize(orjson.loads(orjson.dumps(doc))):
                self.session.feed(item, self)
        return self

    def at(self, now: float) -> Run:
        self.session.advance(now, self)
        return self

    def actions(self) -> list[tuple[str, str]]:
        return [(d.action, d.target) for d in self.decisions]


# Guardrails that would hide the rule under test are relaxed; their own tests are elsewhere.
# The tests time decisions as "budget + 2 check intervals": they pin the 3 checks, and no
# expected cold start, so a phase with no history keeps its static budget (the floor of
# `policy.history.budget` is tested in tests/policy/test_first_wave.py).
RELAXED = """
stuck_pod: {checks: 3, expected_cold_start_s: 0}
guardrails:
  min_age: {factor: 0}
  rate_limit: {per_minute: 600, burst: 100}
"""


@pytest.fixture
def run() -> Run:
    return Run(load_policy(RELAXED))


def make_run(text: str, keeps_learned: bool = False) -> Run:
    return Run(load_policy(text), keeps_learned)
