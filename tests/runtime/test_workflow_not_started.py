"""Issue 18 #9 (last part): a workflow Argo accepts that never starts (no controller, a quota)
used to be polled quietly forever. Now one still Pending `start_within_s` after its submit is
told to on-call once, in the act's thread and broadcast, and followed to its end all the same.
The worker on a virtual clock: Argo scripted with a Recorder, then the real ArgoExecutor
against the Argo stand-in (which holds a workflow Pending as a server with no controller
does), Slack through the real SlackNotifier against the Slack stand-in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.executors.argo import ArgoConfig, ArgoExecutor, Backoff
from remediator.executors.protocol import Command, Executor, Outcome, Poll, Running, Tell
from remediator.executors.recorder import Recorder
from remediator.executors.slack import SlackConfig, SlackNotifier
from remediator.guard.state import GuardState
from remediator.runtime.clock import VirtualClock
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.worker import Acting, WorkerSettings
from tests.executors.conftest import TOKEN as ARGO_TOKEN
from tests.executors.conftest import delete_decision
from tests.runtime.test_virtual_clock import T0, Argo, Rig, pod, slack_ok
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import argo_fixture, slack_fixture
from tests.standins.slack_server import SlackStandin

SLACK_TOKEN = "xoxb-not-started"
CHANNEL = "C0REMEDIATE"


class PendingArgo(Argo):
    """Submit -> Submitted; Poll -> Pending `pending` times, then Running, then Succeeded."""

    def __init__(self, pending: int) -> None:
        super().__init__(running=1)
        self.pending = pending

    def __call__(self, command: Command) -> Outcome:
        if isinstance(command, Poll) and self.pending > 0:
            self.pending -= 1
            return Running(command.workflow, "Pending", "http://ui/wf-1")
        return super().__call__(command)


def notes(rig: Rig) -> list[str]:
    return [type(c.note).__name__ for c in rig.slack.carried if isinstance(c, Tell)]


async def every(rig: Rig, seconds: float, until: float) -> None:
    t = rig.clock.now() - T0
    while t < until:
        t += seconds
        await rig.at(t)


async def test_a_workflow_pending_past_the_bound_is_told_once_and_followed_to_its_end() -> None:
    rig = Rig(PendingArgo(pending=100), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)  # submitted, act told
    await every(rig, 5.0, until=61 + 295)
    assert notes(rig) == ["Acted"]  # Pending, but within the 300 s bound
    await every(rig, 5.0, until=61 + 400)
    assert notes(rig) == ["Acted", "NotStarted"]  # told once, not on every poll after
    told = rig.slack.carried[1]
    assert isinstance(told, Tell) and told.thread == "ts-1"  # in the act's thread
    assert told.note.workflow == "wf-1" and told.note.waited_s >= 300  # type: ignore[union-attr]
    assert rig.counted("executions", action="delete-pod", result="not_started") == 1
    (row,) = rig.outbox.rows()
    assert (row.state, row.stuck_ts) == ("submitted", "ts-2")
    await every(rig, 5.0, until=61 + 400 + 5 * 100)  # it starts at last, and ends
    assert notes(rig) == ["Acted", "NotStarted", "Finished"]
    assert [r.state for r in rig.outbox.rows()] == ["ended"]


async def test_a_workflow_that_starts_in_time_is_not_told_about() -> None:
    rig = Rig(PendingArgo(pending=3), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    await every(rig, 5.0, until=61 + 600)
    assert notes(rig) == ["Acted", "Finished"]


async def test_a_restart_neither_resets_the_bound_nor_tells_twice(tmp_path: Path) -> None:
    """The bound counts from the submit stored in the outbox, not from the new process's start;
    the note's ts is stored, so the next process does not tell it again."""
    clock = VirtualClock(T0)
    argo = PendingArgo(pending=1000)
    first = _worker(tmp_path, clock, argo)
    _outbox(first).record([delete_decision(at=T0)], GuardState())
    await _pass(first, clock, 0)  # submitted at T0
    await _pass(first, clock, 250)
    _outbox(first).close()

    second = _worker(tmp_path, clock, argo)  # restarted 250 s after the submit
    await _pass(second, clock, 260)
    assert _told(second) == []
    await _pass(second, clock, 310)  # 310 s after the submit, 60 s after the restart
    assert _told(second) == ["NotStarted"]
    _outbox(second).close()

    third = _worker(tmp_path, clock, argo)
    await _pass(third, clock, 400)
    assert _told(third) == []  # told already, by the process before


# --- the real ArgoExecutor against the Argo stand-in ------------------------------------------


argo = argo_fixture(ARGO_TOKEN)


slack = slack_fixture(SLACK_TOKEN)


async def test_through_the_argo_client_a_workflow_left_pending_is_told_in_the_thread(
    tmp_path: Path, argo: ArgoStandin, slack: SlackStandin
) -> None:
    """The stand-in answers a workflow with no phase, as the real Argo server does with no
    workflow-controller running: the client reads it as Pending."""
    clock = VirtualClock(T0)
    (tmp_path / "argo-token").write_text(ARGO_TOKEN)
    (tmp_path / "slack-token").write_text(SLACK_TOKEN)
    executor = ArgoExecutor(
        ArgoConfig(
            host=argo.url,
            token_env="REMEDIATOR_TEST_UNSET_ARGO_TOKEN",
            token_file=str(tmp_path / "argo-token"),
        ),
        backoff=Backoff(attempts=1),
    )
    notifier = SlackNotifier(
        SlackConfig(
            channel=CHANNEL,
            base_url=slack.url,
            token_env="REMEDIATOR_TEST_UNSET_SLACK_TOKEN",
            token_file=str(tmp_path / "slack-token"),
        )
    )
    worker = _worker(tmp_path, clock, executor, notifier, start_within_s=60.0)
    decision = delete_decision(at=T0)
    _outbox(worker).record([decision], GuardState())
    await _pass(worker, clock, 0)
    (row,) = _outbox(worker).rows()
    assert row.workflow is not None
    argo.script(row.workflow, "")  # never picked up: no phase, ever
    for t in range(5, 120, 5):
        await _pass(worker, clock, t)
    act, stuck = slack.posted()
    assert stuck.body["thread_ts"] == act.ts
    assert stuck.body["reply_broadcast"] is True
    assert "Workflow not started" in stuck.body["text"]
    argo.script(row.workflow, "Running", "Succeeded")  # a controller at last
    for t in range(125, 150, 5):
        await _pass(worker, clock, t)
    end = slack.posted()[-1]
    assert end.body["thread_ts"] == act.ts and "Succeeded" in end.body["text"]
    assert [r.state for r in _outbox(worker).rows()] == ["ended"]


# --- helpers ----------------------------------------------------------------------------------


def _worker(
    tmp_path: Path,
    clock: VirtualClock,
    argo: Callable[[Command], Outcome] | Executor,
    notifier: Executor | None = None,
    start_within_s: float = 300.0,
) -> Acting:
    cluster = argo if isinstance(argo, ArgoExecutor) else Recorder(argo)  # type: ignore[arg-type]
    worker = Acting(
        OutboxRows(Outbox(tmp_path / "state.db", clock.now)),
        cluster,
        notifier or Recorder(slack_ok()),
        clock,
        RuntimeMetrics.on(CollectorRegistry()),
        "me",
        WorkerSettings(poll_s=5.0, start_within_s=start_within_s),
    )
    worker.lead(True, None)
    return worker


async def _pass(worker: Acting, clock: VirtualClock, t: float) -> None:
    await clock.advance(T0 + t - clock.now())
    await worker.step()
    await worker.idle()


def _told(worker: Acting) -> list[str]:
    carried = getattr(worker.notifier, "carried", [])
    return [
        type(c.note).__name__
        for c in carried
        if isinstance(c, Tell) and type(c.note).__name__ not in ("Acted", "Finished")
    ]


def _outbox(worker: Acting) -> Outbox:
    assert isinstance(worker.store, OutboxRows)
    return worker.store.outbox
