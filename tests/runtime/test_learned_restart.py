"""serve keeps what it learned across a restart: its siblings' phase and step times.

Before, a restarted serve (an upgrade, a node drained under it) began with no history: no
adaptive budget and no step judged by progress until `min_samples` more cold starts of each
model had finished with their logs followed, which in a steady fleet can be days. A pod that
hung meanwhile waited out its whole phase budget. Now each finished cold start's samples
are written to the state file beside the outbox and given back to the core on start.

The deciding half of serve (session, driver, outbox) on a virtual clock; the same real vLLM
lines and times as tests/policy/test_progress.py: five healthy siblings, then a restart, then
a pod whose log stops after it sized its KV cache.
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.decode import normalize
from remediator.policy.workloads import ready_created
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox
from remediator.session import Session
from tests.policy import test_progress as progress
from tests.policy.builders import MODEL, T0, pod
from tests.runtime.test_durable_intake import write_locked

POLICY = progress.POLICY % ("true", 5)
HUNG = 9


class Serve:
    """One serve's deciding half on a state file, fed and ticked on `clock`."""

    def __init__(self, path: Path, clock: VirtualClock) -> None:
        self.clock = clock
        self.outbox = Outbox(path, clock.now)
        self.driver = Driver(
            Session(load_policy(POLICY), keeps_learned=True),
            self.outbox,
            clock,
            RuntimeMetrics.on(CollectorRegistry()),
            leading=lambda: True,
            wake_worker=lambda: None,
            simulated=lambda s: None,
        )
        self.driver.restore()

    def feed(self, *docs: dict[str, Any]) -> Serve:
        for doc in docs:
            self.driver.feed(normalize(orjson.loads(orjson.dumps(doc))))
        return self

    async def until(self, at: float) -> None:
        """Ticks every 10 s up to `at` (seconds after T0)."""
        while self.clock.now() < T0 + at:
            await self.clock.advance(min(10.0, T0 + at - self.clock.now()))
            self.driver.tick()

    def deleted(self) -> list[Decision]:
        return [r.decision for r in self.outbox.rows() if r.decision.action == "delete-pod"]


async def _learn(path: Path, clock: VirtualClock) -> None:
    """Five healthy siblings finish their cold starts; then serve stops."""
    first = Serve(path, clock)
    for i in range(5):
        created = i * 1000.0
        await first.until(created)
        started = progress._start(first, i, created, progress.STEPS)  # type: ignore[arg-type]
        await first.until(started + progress.READY)
        first.feed(pod(progress._name(i), progress._uid(i), created=created,
                       scheduled=created + 1, started=started,
                       ready=started + progress.READY))  # fmt: skip
    await first.until(5000)
    assert first.deleted() == []
    first.outbox.close()


async def _hang(path: Path, clock: VirtualClock) -> tuple[Serve, float]:
    """A restarted serve; a new pod whose log stops once it sized its KV cache."""
    second = Serve(path, clock)
    started = progress._start(second, HUNG, 5000.0, progress.STEPS[:6])  # type: ignore[arg-type]
    await second.until(started + 62 + 120 + 30)
    return second, started


async def test_a_restarted_serve_judges_a_stalled_pod_by_its_siblings(tmp_path: Path) -> None:
    clock = VirtualClock(T0)
    await _learn(tmp_path / "state.db", clock)
    second, started = await _hang(tmp_path / "state.db", clock)
    (deleted,) = second.deleted()
    assert deleted.target == progress._name(HUNG)
    assert deleted.at - T0 == pytest.approx(started + 62 + 120 + 20, abs=10)
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs)" in deleted.reason
    assert "5 siblings of meta-llama/Llama-3.1-70B-Instruct took 38s there" in deleted.reason


async def test_a_restarted_serve_knows_which_of_a_workload_s_pods_got_ready(
    tmp_path: Path,
) -> None:
    """blast_radius stops counting a deletion once a pod created after it is Ready
    (Decision.ready_created): after a restart too, where the Ready pods are stored with the
    rest of what was learned."""
    clock = VirtualClock(T0)
    await _learn(tmp_path / "state.db", clock)
    second = Serve(tmp_path / "state.db", clock)
    history = second.driver.session.engine.history
    created = tuple(T0 + i * 1000.0 for i in range(5))
    assert ready_created(history, "llm/Deployment/vllm-70b") == created


async def test_the_control_a_new_state_file_waits_for_the_phase_budget(tmp_path: Path) -> None:
    """The same run with the state file lost in between: nothing learned, nothing judged
    by progress; the pod waits for its 600 s phase budget."""
    clock = VirtualClock(T0)
    await _learn(tmp_path / "state.db", clock)
    second, started = await _hang(tmp_path / "other.db", clock)
    assert second.deleted() == []
    await second.until(started + 600 + 40)
    (deleted,) = second.deleted()
    assert deleted.at - T0 == pytest.approx(started + 600 + 20, abs=10)
    assert "over its 600s budget" in deleted.reason


async def test_each_history_keeps_its_last_window_and_unreadable_rows_are_left_out(
    tmp_path: Path,
) -> None:
    outbox = Outbox(tmp_path / "state.db", lambda: T0)
    outbox.learn([("m", "image_pull", float(s)) for s in range(30)], keep=20)
    outbox.learn([("m", "engine_init", 90.0), ("n", "image_pull", 5.0)], keep=20)
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("INSERT INTO learned VALUES ('bad', 'total', '[1, \"x\"]', 0)")
        db.execute("INSERT INTO learned VALUES ('nan', 'total', '[NaN]', 0)")
    samples, bad = outbox.learned()
    assert [s for m, p, s in samples if (m, p) == ("m", "image_pull")] == [float(s) for s in
                                                                         range(10, 30)]  # fmt: skip
    assert ("m", "engine_init", 90.0) in samples and ("n", "image_pull", 5.0) in samples
    assert sorted(b.split(":")[0] for b in bad) == ["bad/total", "nan/total"]
    outbox.learn([("bad", "total", 7.0)], keep=20)  # an unreadable row is written anew
    samples, bad = outbox.learned()
    assert ("bad", "total", 7.0) in samples and [b.split(":")[0] for b in bad] == ["nan/total"]
    # serve starts on it all the same, with what could be read.
    clock = VirtualClock(T0)
    outbox.close()
    serve = Serve(tmp_path / "state.db", clock)
    assert serve.driver.session.engine.history.count("m", "image_pull") == 20


async def test_a_refused_write_keeps_the_samples_and_ends_as_healthy(tmp_path: Path) -> None:
    """Another process holds the state file's write lock while a cold start finishes: the
    store says it fails (serve's /healthz), nothing learned is lost, and the next write
    that goes through says the store is fine again."""
    clock = VirtualClock(T0)
    serve = Serve(tmp_path / "state.db", clock)
    ready = dict(created=0.0, scheduled=1.0, started=10.0, ready=100.0)
    with write_locked(str(tmp_path / "state.db")):
        serve.feed(pod(progress._name(1), progress._uid(1), **ready))
        assert serve.driver.store.failing() is not None
    serve.feed(pod(progress._name(2), progress._uid(2), **ready))
    assert serve.driver.store.failing() is None
    samples, _ = serve.outbox.learned()
    assert [s for m, p, s in samples if p == "total"] == [100.0, 100.0]


def test_a_session_that_does_not_keep_learned_hands_nothing_back() -> None:
    """Replay and the simulator: nothing to store, nothing piles up."""
    session = Session(load_policy(POLICY))
    out = _Sink()
    for doc in (pod("p", "u", created=0, scheduled=1, started=10, ready=100),):
        for item in normalize(orjson.loads(orjson.dumps(doc))):
            session.feed(item, out)
    assert session.engine.history.count(MODEL, "total") == 1
    assert session.learned() == ()


class _Sink:
    def transition(self, change: object) -> None: ...
    def decision(self, decision: Decision) -> None: ...
    def suppressed(self, suppressed: Suppressed) -> None: ...
    def ignored(self, ignored: object) -> None: ...


def test_serve_gives_back_what_it_learned_before_it_ever_let_anything_through(
    config: Any,
) -> None:
    """A state file with learned rows and no guard state (a standby, a quiet fleet, a
    replica that took the shared copy): the service restores the history all the same.
    (Before, the service restored the state file only when a guard state was saved.)"""
    from remediator.runtime.service import Service  # (the fixture's config is the service's)

    cfg = replace(config, watch=False)
    Path(cfg.state_db).parent.mkdir(parents=True, exist_ok=True)
    seeded = Outbox(cfg.state_db, lambda: T0)
    seeded.learn([(MODEL, "engine_init", 100.0 + i) for i in range(6)], keep=50)
    assert seeded.guard_state(acting=True) is None
    seeded.close()
    service = Service(cfg)
    try:
        history = service.session.decider.engine.history
        assert history.count(MODEL, "engine_init") == 6
    finally:
        service.outbox.close()
