"""Issue 10 #11: outbox counts are kept, not computed (a scrape never scans the table), and
closed rows are pruned after the retention period, with a metric. Work is measured in
SQLite virtual-machine steps (a progress handler), never in time."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.guard.state import GuardState
from remediator.runtime.metrics import OutboxCollector
from remediator.runtime.outbox import Outbox, decision_to_json
from remediator.runtime.rows import SUBMITTING
from tests.runtime.test_virtual_clock import T0, Argo, Rig, pod, slack_ok

DAY = 86400.0


def decision(i: int) -> Decision:
    return Decision("notify", "llm", f"vllm-{i}", "why", f"incident-{i}", T0)


@contextmanager
def vm_steps(outbox: Outbox) -> Iterator[list[int]]:
    """Count the SQLite VM instructions run on the outbox's connection (observed only)."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    db: sqlite3.Connection = outbox._db
    db.set_progress_handler(tick, 1)
    try:
        yield steps
    finally:
        db.set_progress_handler(None, 1)


def test_counts_of_10k_rows_read_no_table() -> None:
    clock = [T0]
    outbox = Outbox(":memory:", lambda: clock[0])
    ids = outbox.record([decision(i) for i in range(10_000)], GuardState())
    for rid in ids[:3000]:
        outbox.mark(rid, "ended")
    outbox.expire(T0 + 1, "stale")  # pending ones written before T0 + 1: the rest
    registry = CollectorRegistry()
    registry.register(OutboxCollector(outbox))
    with vm_steps(outbox) as steps:
        counts = outbox.counts()
        scraped = registry.get_sample_value("remediator_outbox_rows", {"state": "ended"})
    assert counts == {"ended": 3000, "expired": 7000}
    assert scraped == 3000
    assert steps[0] < 500  # two reads of five rows; a COUNT over 10k rows takes 10k+


def test_counts_survive_a_restart_and_an_old_state_file(tmp_path: Path) -> None:
    """A state file from before the counts (and the message columns) is migrated once."""
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(
        """CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, incident TEXT NOT NULL,
        action TEXT NOT NULL, decision TEXT NOT NULL, state TEXT NOT NULL, workflow TEXT,
        phase TEXT, error TEXT, slack_ts TEXT, attempts INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL, updated_at REAL NOT NULL, UNIQUE (incident, action));"""
    )
    old.execute(
        "INSERT INTO outbox (incident, action, decision, state, created_at, updated_at)"
        " VALUES ('i-1', 'notify', ?, 'submitted', 1, 1)",
        (decision_to_json(decision(1)),),
    )
    old.commit()
    old.close()
    outbox = Outbox(path)
    assert outbox.counts() == {"submitted": 1}
    (row,) = outbox.open_rows()
    assert (row.act_at, row.end_at, row.end_ts) == (None, None, None)
    outbox.mark(row.id, "ended")
    outbox.close()
    assert Outbox(path).counts() == {"ended": 1}


def test_closed_rows_older_than_retention_are_pruned_open_ones_never() -> None:
    clock = [T0]
    outbox = Outbox(":memory:", lambda: clock[0])
    a, b, c, d, e, f = outbox.record([decision(i) for i in range(6)], GuardState())
    outbox.mark(a, "ended")
    outbox.mark(b, "failed", end_at=T0, end_ts="1.000001")  # failed and told
    outbox.mark(c, "failed", end_at=T0)  # failed, its "could not act" not yet told
    outbox.mark(d, "expired")
    outbox.mark(e, "submitted")
    clock[0] = T0 + 8 * DAY
    outbox.mark(f, "ended")  # closed recently
    assert outbox.prune(T0 + 1 * DAY, batch=2) == 3  # in batches: 2, then 1
    assert sorted(r.id for r in outbox.rows()) == [c, e, f]
    assert outbox.counts() == {"failed": 1, "submitted": 1, "ended": 1}


async def test_the_worker_prunes_on_its_clock_and_counts_it() -> None:
    rig = Rig(Argo(running=0), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    await rig.at(62)
    assert [r.state for r in rig.outbox.rows()] == ["ended"]
    await rig.at(62 + 7 * DAY - 10)  # not yet a week since it ended
    assert len(rig.outbox.rows()) == 1
    await rig.at(62 + 7 * DAY + 3600)  # the next hourly prune after a week
    assert rig.outbox.rows() == []
    assert rig.metrics.outbox_pruned._value.get() == 1


def test_pending_deletions_and_hedges_of_a_pod_gone_expire_and_nothing_else() -> None:
    """A pod that went away takes its pending deletion and its pending hedge with it; a note
    about it, and another pod's hedge, stay."""
    outbox = Outbox(":memory:", lambda: T0)
    mine = "11111111-2222-3333-4444-555555555555"
    rows = [
        Decision("delete-pod", "llm", "vllm-0", "hung", "stuck-1", T0, uid=mine),
        Decision("hedge-pod", "llm", "vllm-0", "stalled", "hedge-1", T0, uid=mine),
        Decision("notify", "llm", "vllm-0", "told", "note-1", T0, uid=mine),
        Decision("hedge-pod", "llm", "vllm-1", "stalled", "hedge-2", T0, uid="other-uid"),
    ]
    outbox.record(rows, GuardState())
    dropped = outbox.drop_for_gone_pod(mine, "not executed: the pod was gone")
    assert sorted(r.decision.action for r in dropped) == ["delete-pod", "hedge-pod"]
    states = {r.decision.incident: r.state for r in outbox.rows()}
    assert states == {"stuck-1": "expired", "hedge-1": "expired", "note-1": "pending",
                      "hedge-2": "pending"}  # fmt: skip


def test_a_pending_deletion_whose_submit_was_tried_stays_when_its_pod_goes() -> None:
    """Its workflow may exist and may be what deleted the pod: the next submit's 409 finds it,
    and it is followed to its end (tests/live/argo/test_workflows.py, serve killed)."""
    outbox = Outbox(":memory:", lambda: T0)
    mine = "11111111-2222-3333-4444-555555555555"
    outbox.record([Decision("delete-pod", "llm", "vllm-0", "hung", "stuck-1", T0, uid=mine)],
                  GuardState())  # fmt: skip
    (row,) = outbox.rows()
    outbox.mark(row.id, None, phase=SUBMITTING)
    assert outbox.drop_for_gone_pod(mine, "not executed: the pod was gone") == []
    assert [r.state for r in outbox.rows()] == ["pending"]
