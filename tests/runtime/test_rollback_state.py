"""serve after a rollback: the state file holds guard state a newer release wrote, with a
record of a guardrail this release does not have. Before, serve refused the file (exit 3:
"move it away"), which also threw away its outbox and inbox; now it starts, says which
records it keeps unused, acts as this release does, and writes them back unchanged.

The deciding half of serve (session, driver, outbox) on a virtual clock, as
tests/runtime/test_learned_restart.py runs it: a pod whose log stops after it sized its KV
cache, deleted when its 600 s phase budget is spent (no history: no progress judging)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from remediator.core.guard import FOREIGN_RECORDS
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.outbox import Outbox
from remediator.session import Session
from tests.policy import test_progress as progress
from tests.policy.builders import T0
from tests.runtime.test_learned_restart import HUNG, POLICY, Serve

# A newer release's guardrail's record (any JSON a stage writes), and one of this release's.
NEWER = {"nodes": [["gpu-node-3", T0 - 60.0]], "hours": {"7": 2}}


def _newer_release_state(path: Path) -> None:
    text = json.dumps({"version": 1, "node_quiet": NEWER, "kill_switch": {"engaged": False}})
    outbox = Outbox(path, lambda: T0)
    outbox.save_guard(Session(load_policy(POLICY)).pipeline.load_state(text))
    outbox.close()


async def test_a_newer_releases_guard_state_is_kept_unused_and_written_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="remediator.runtime")
    path = tmp_path / "state.db"
    _newer_release_state(path)
    clock = VirtualClock(T0)
    serve = Serve(path, clock)  # starts: no StateError
    said = [
        getattr(r, "records", None) for r in caplog.records if r.getMessage() == FOREIGN_RECORDS
    ]
    assert said == [["node_quiet"]]
    started = progress._start(serve, HUNG, 0.0, progress.STEPS[:6])  # type: ignore[arg-type]
    await serve.until(started + 600 + 40)
    (deleted,) = serve.deleted()  # this release's guardrails let it through, as ever
    assert deleted.target == progress._name(HUNG)
    stored = json.loads(serve.outbox.guard_state(acting=True) or "{}")
    assert stored["node_quiet"] == NEWER  # written back as it came
    assert "idempotency" in stored  # beside what this release recorded
