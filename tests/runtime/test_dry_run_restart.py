"""A dry run survives a restart exactly as a live run does (issue 18, defect 10): what
got through is written with the guard state that let it through, as a `dry` row, so a
serve restarted on the same state file does not announce the same "would" again."""

from __future__ import annotations

from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.guard import GuardState
from remediator.inputs.decode import normalize
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox
from remediator.session import Session
from tests.runtime.test_virtual_clock import POLICY, T0, pod

DRY = POLICY + "guardrails: {dry_run: {enabled: true}}\n"


class Serve:
    """One serve's deciding half on a state file: session, driver, outbox."""

    def __init__(self, path: Path, clock: VirtualClock, policy: str) -> None:
        self.outbox = Outbox(path, clock.now)
        self.would: list[Suppressed] = []
        self.driver = Driver(
            Session(load_policy(policy)),
            self.outbox,
            clock,
            RuntimeMetrics.on(CollectorRegistry()),
            leading=lambda: True,
            wake_worker=lambda: None,
            simulated=self.would.append,
        )
        self.driver.restore()

    def feed(self, doc: dict[str, object]) -> None:
        self.driver.feed(normalize(orjson.loads(orjson.dumps(doc))))


async def _restarts(tmp_path: Path, policy: str) -> tuple[list[Decision], list[Serve]]:
    """One hung pod; serve restarted twice on its state file, each relisting the pod."""
    clock = VirtualClock(T0)
    served: list[Serve] = []
    for _ in range(3):
        serve = Serve(tmp_path / "state.db", clock, policy)
        serve.feed(pod("vllm-0", started=T0))
        await clock.advance(70)
        serve.driver.tick()
        served.append(serve)
        serve.outbox.close()
    told = [s.decision for serve in served for s in serve.would]
    return told, served


async def test_a_restarted_dry_run_does_not_announce_its_would_again(tmp_path: Path) -> None:
    told, served = await _restarts(tmp_path, DRY)
    assert [(d.action, d.target) for d in told] == [("delete-pod", "vllm-0")]
    rows = Outbox(tmp_path / "state.db").rows()
    assert [(r.decision.action, r.state) for r in rows] == [("delete-pod", "dry")]


async def test_a_restarted_live_run_acts_once_the_same_way(tmp_path: Path) -> None:
    told, _ = await _restarts(tmp_path, POLICY)
    assert told == []
    rows = Outbox(tmp_path / "state.db").rows()
    assert [(r.decision.action, r.state) for r in rows] == [("delete-pod", "pending")]


def test_a_live_decision_takes_over_a_dry_rows_incident(tmp_path: Path) -> None:
    """Dry run switched off on the same state file: a live decision for an incident the dry
    run wrote is recorded (its row taken over, pending), never silently ignored."""
    outbox = Outbox(tmp_path / "state.db")
    d = Decision("delete-pod", "llm", "vllm-0", "stuck", "inc-1", T0, uid="u-1")
    assert outbox.record([], GuardState(), dry=[d]) == []
    assert [(r.state, r.decision.incident) for r in outbox.rows()] == [("dry", "inc-1")]
    assert outbox.open_rows() == []  # a dry row is never executed
    (row,) = outbox.record([d], GuardState())
    assert [(r.id, r.state) for r in outbox.rows()] == [(row, "pending")]
    assert outbox.record([d], GuardState()) == []  # and only once
    assert outbox.counts() == {"pending": 1}
