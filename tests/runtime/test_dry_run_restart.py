"""A dry run survives a restart exactly as a live run does (issue 18, defect 10): what
got through is written with the guard state that let it through, as a `dry` row, so a
serve restarted on the same state file does not announce the same "would" again.

And switching the dry run off acts: an acting serve on a dry run's state file does not take
the "would" as done (idempotency, dedup) nor as spent (blast radius, rate limit): the pod the
dry run announced is deleted, exactly once; the other way, a dry run on an acting serve's
file does not announce again what was acted on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.executors.protocol import Submit
from remediator.executors.recorder import Recorder
from remediator.guard import GuardState
from remediator.inputs.decode import decode, normalize
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.session import Session
from tests.core.differential import Advance, Feed, Step, through_driver
from tests.policy import builders
from tests.policy.conftest import RELAXED
from tests.runtime.test_virtual_clock import POLICY, T0, Argo, pod, slack_ok

DRY = POLICY + "guardrails: {dry_run: {enabled: true}}\n"
# One deletion cluster-wide per window: a "would" that spent it would hold the live one.
ONE = "guardrails: {blast_radius: {max_pods_cluster: 1, window_s: 3600}, dry_run: {enabled: %s}}\n"


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


class ServeActing(Serve):
    """A serve that carries its rows out too: the outbox worker, Argo recorded."""

    def __init__(self, path: Path, clock: VirtualClock, policy: str) -> None:
        super().__init__(path, clock, policy)
        self.argo = Recorder(Argo(running=0))
        self.worker = Acting(
            OutboxRows(self.outbox),
            self.argo,
            Recorder(slack_ok()),
            clock,
            RuntimeMetrics.on(CollectorRegistry()),
            "me",
            WorkerSettings(poll_s=5.0, fresh_for_s=600.0),
        )
        self.worker.lead(True, None)

    async def run(self, clock: VirtualClock, seconds: float) -> None:
        """The pod relisted, then `seconds` of ticks, each followed by a worker pass."""
        self.feed(pod("vllm-0", started=T0))
        for _ in range(int(seconds // 10)):
            await clock.advance(10)
            self.driver.tick()
            await self.worker.step()
            await self.worker.idle()

    def deleted(self) -> list[str]:
        return [c.decision.target for c in self.argo.carried if isinstance(c, Submit)]


async def _serves(tmp_path: Path, *dry: bool) -> list[ServeActing]:
    """One hung pod; one serve after another on one state file, dry or acting by turn."""
    clock = VirtualClock(T0)
    served: list[ServeActing] = []
    for each in dry:
        serve = ServeActing(tmp_path / "state.db", clock, POLICY + ONE % str(each).lower())
        await serve.run(clock, 100)
        await serve.worker.close()
        serve.outbox.close()
        served.append(serve)
    return served


async def test_switching_the_dry_run_off_deletes_the_announced_pod_once(tmp_path: Path) -> None:
    dry, live, again = await _serves(tmp_path, True, False, False)
    assert [(s.decision.action, s.decision.target) for s in dry.would] == [("delete-pod", "vllm-0")]
    assert dry.deleted() == []
    # Not held as a repeat of the "would", nor by the cluster-wide cap it never spent.
    assert live.deleted() == ["vllm-0"] and live.would == []
    assert again.deleted() == [] and again.would == []  # and once: an acting run remembers
    rows = Outbox(tmp_path / "state.db").rows()
    assert [(r.decision.action, r.state) for r in rows] == [("delete-pod", "ended")]


async def test_switching_the_dry_run_on_does_not_announce_what_was_acted_on(
    tmp_path: Path,
) -> None:
    live, dry = await _serves(tmp_path, False, True)
    assert live.deleted() == ["vllm-0"]
    assert dry.would == [] and dry.deleted() == []


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


def _old_file(path: Path, row_state: str) -> None:
    """A state file from before the guard state was kept per kind of run: one row, and one
    guard state with no `live_state` beside it."""
    outbox = Outbox(path)
    d = Decision("delete-pod", "llm", "vllm-0", "stuck", "inc-1", T0, uid="u-1")
    if row_state == "dry":
        outbox.record([], GuardState(), dry=[d], acting=False)
    else:
        outbox.record([d], GuardState())
    outbox.close()
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE guard_state DROP COLUMN live_state")
    db.commit()
    db.close()


@pytest.mark.parametrize(("rows", "acting_restores"), [("dry", False), ("pending", True)])
def test_an_older_files_state_is_an_acting_runs_unless_only_a_dry_run_wrote_it(
    tmp_path: Path, rows: str, acting_restores: bool
) -> None:
    path = tmp_path / "old.db"
    _old_file(path, rows)
    outbox = Outbox(path)
    assert outbox.guard_state() == '{"version":1}'  # a dry run reads it as before
    assert (outbox.guard_state(acting=True) is not None) is acting_restores


# --- the kill-loop memory comes back with the state file (found by the live differential) ---

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "99999999-2222-3333-4444-555555555555"
KILL_LOOP = RELAXED + "  blast_radius: {window_s: 1}\n"


def _kill_loop() -> list[Step]:
    """Pod A hangs in engine init and is deleted; its replacement B, created after the
    deletion, is as slow: the kill-loop guard holds B and tells on-call the budget is tight."""
    docs = [
        builders.pod(created=0, scheduled=1, started=10),
        builders.pod(created=0, scheduled=1, started=10, watch="DELETED"),
        builders.pod(
            "vllm-70b-7c9d5b6f4-fghij", UID_B, watch="ADDED", created=96, scheduled=97, started=100
        ),  # fmt: skip
    ]
    a, gone, b = (Feed(item) for doc in docs for item in decode(orjson.dumps(doc)))
    return [a, Advance(builders.T0 + 95), gone, b, Advance(builders.T0 + 400)]


@pytest.mark.parametrize("dry", [False, True], ids=["live", "dry"])
@pytest.mark.parametrize("restart_at", [2, 3, 4])
async def test_a_restart_between_a_deletion_and_its_replacement_changes_nothing(
    dry: bool, restart_at: int
) -> None:
    """A serve restarted after it deleted A (or would have) and before B's deadline: the
    kill-loop memory comes back from the state file's rows with the guard state, so B is held
    and the budget told, as without the restart (not deleted in turn: a kill loop)."""
    policy = load_policy(KILL_LOOP + ("  dry_run: {enabled: true}\n" if dry else ""))
    steps = _kill_loop()
    unbroken = await through_driver(steps, policy, 0)
    assert [a for a, _, _ in unbroken.through] == ["delete-pod", "notify"]
    restarted = await through_driver(steps, policy, restart_at)
    assert restarted.through == unbroken.through
