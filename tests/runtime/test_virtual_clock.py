"""The runtime's two halves on a virtual clock: the driver (inputs, timers -> outbox) and
the outbox worker (rows -> executors -> outcomes), with `Recorder` executors scripted per
test. No server, no sleep, no wait on wall time: each step is called and awaited, and
the clock moves only when the test moves it. The stand-in tests beside this file cover
the same paths against real clients over loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from remediator.executors.protocol import (
    Acted,
    Command,
    CouldNot,
    Ended,
    Outcome,
    Poll,
    Posted,
    Refused,
    Running,
    Submit,
    Submitted,
    Tell,
    Unavailable,
    WouldHave,
)
from remediator.executors.recorder import Recorder
from remediator.inputs.decode import normalize
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.rows import SUBMITTING
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.session import Session

T0 = 1_750_000_000.0
POLICY = """
stuck_pod:
  budgets: {engine_init: 60}
  checks: 1
  check_interval_s: 10
  expected_cold_start_s: 0
  adaptive: {enabled: false}
"""


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, started: float) -> dict[str, Any]:
    """A vLLM pod whose engine started at `started` and is not Ready."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "llm",
            "uid": f"00000000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}",
            "creationTimestamp": iso(started - 30),
            "labels": {"app": "vllm-inference"},
            # The API server stamps the kubelet's status write: the clock the session reads.
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "subresource": "status",
                    "time": iso(started),
                }
            ],
        },
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "vllm", "image": "vllm:1"}]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(started - 5)},
                {"type": "Ready", "status": "False", "lastTransitionTime": iso(started - 5)},
            ],
            "containerStatuses": [
                {
                    "name": "vllm",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": iso(started)}},
                }
            ],
        },
    }


class Argo:
    """Scripted answers: Submit -> Submitted; Poll -> `running` times Running, then Ended."""

    def __init__(self, running: int = 1, submit: Outcome | None = None) -> None:
        self.running = running
        self.submit = submit

    def __call__(self, command: Command) -> Outcome:
        if isinstance(command, Submit):
            d = command.decision
            return self.submit or Submitted("wf-1", "argo", "t", d.incident, True, "http://ui/wf-1")
        assert isinstance(command, Poll)
        if self.running > 0:
            self.running -= 1
            return Running(command.workflow, "Running", "http://ui/wf-1")
        return Ended(command.workflow, "Succeeded", "", None, None, "http://ui/wf-1")


def slack_ok() -> Callable[[Command], Outcome]:
    count = iter(range(1, 1000))
    return lambda command: Posted(f"ts-{next(count)}")


class Rig:
    def __init__(
        self,
        argo: Callable[[Command], Outcome],
        slack: Callable[[Command], Outcome],
        policy: str = POLICY,
        leading: bool = True,
        sources_behind: Callable[[], str | None] | None = None,
    ) -> None:
        self.clock = VirtualClock(T0)
        self.outbox = Outbox(":memory:", self.clock.now)
        self.session = Session(load_policy(policy))
        self.metrics = RuntimeMetrics.on(CollectorRegistry())
        self.argo, self.slack = Recorder(argo), Recorder(slack)
        self.worker = Acting(
            OutboxRows(self.outbox),
            self.argo,
            self.slack,
            self.clock,
            self.metrics,
            "me",
            WorkerSettings(poll_s=5.0, fresh_for_s=600.0),
        )
        self.worker.lead(leading, None)
        self.driver = Driver(
            self.session,
            self.outbox,
            self.clock,
            self.metrics,
            leading=lambda: self.worker.leading,
            wake_worker=lambda: None,
            simulated=lambda held: self.worker.note(WouldHave(held.decision, held.reason)),
            sources_behind=sources_behind,
        )

    def feed(self, doc: dict[str, Any]) -> None:
        self.driver.feed(normalize(orjson.loads(orjson.dumps(doc))))

    async def at(self, t: float) -> None:
        """Move the clock to T0 + t, let the timers fire, and run one worker pass to its end."""
        await self.clock.advance(T0 + t - self.clock.now())
        self.driver.tick()
        await self.worker.step()
        await self.worker.idle()

    def rows(self) -> list[tuple[str, str, str | None, str | None]]:
        return [(r.decision.action, r.state, r.phase, r.slack_ts) for r in self.outbox.rows()]

    def counted(self, name: str, **labels: str) -> float:
        metric = {
            "executions": self.metrics.executions,
            "slack_errors": self.metrics.slack_errors,
        }[name]
        if labels:
            return float(metric.labels(**labels)._value.get())
        return sum(
            s.value for m in metric.collect() for s in m.samples if s.name.endswith("_total")
        )


async def test_a_stuck_pod_is_deleted_told_and_followed_to_its_end() -> None:
    rig = Rig(Argo(running=1), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(59)
    assert rig.rows() == []  # within its 60 s budget
    await rig.at(61)
    assert rig.rows() == [("delete-pod", "submitted", None, "ts-1")]
    await rig.at(62)  # first look: still running
    assert rig.rows() == [("delete-pod", "submitted", None, "ts-1")]
    await rig.at(64)  # not looked at again before poll_s
    assert [type(c).__name__ for c in rig.argo.carried] == ["Submit", "Poll"]
    await rig.at(67)
    assert rig.rows() == [("delete-pod", "ended", "Succeeded", "ts-1")]
    told = rig.slack.carried
    assert [type(c.note).__name__ for c in told if isinstance(c, Tell)] == ["Acted", "Finished"]
    finished = told[-1]
    assert isinstance(finished, Tell) and finished.thread == "ts-1"


async def test_unavailable_is_retried_and_refused_fails_the_row_and_tells() -> None:
    down = Argo(submit=Unavailable("argo down"))
    rig = Rig(down, slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    assert rig.rows() == [("delete-pod", "pending", SUBMITTING, None)]  # tried: it may exist
    assert rig.outbox.rows()[0].attempts == 1
    assert rig.counted("executions", action="delete-pod", result="unavailable") == 1
    down.submit = Refused("template not found")
    await rig.at(62)
    assert [r.state for r in rig.outbox.rows()] == ["pending"]  # backing off: next try at 63
    await rig.at(63)
    assert [r.state for r in rig.outbox.rows()] == ["failed"]
    assert rig.outbox.rows()[0].error == "template not found"
    (tell,) = rig.slack.carried
    assert isinstance(tell, Tell) and isinstance(tell.note, CouldNot)


async def test_an_argo_401_is_retried_with_backoff_counted_and_told_once() -> None:
    """Issue 10 #9: a rotated token used to fail the row for good."""
    argo = Argo(submit=Unavailable("Argo refused the request (401): token not valid", True))
    rig = Rig(argo, slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)  # 1st try: 401; next try 2 s later
    await rig.at(62)
    assert len(rig.argo.carried) == 1
    await rig.at(63)  # 2nd try: 401; next try 4 s later
    await rig.at(66)
    assert len(rig.argo.carried) == 2
    assert rig.counted("executions", action="delete-pod", result="unauthorized") == 2
    notes = [c.note for c in rig.slack.carried if isinstance(c, Tell)]
    assert [type(n).__name__ for n in notes] == ["CouldNot"]  # told once, not per retry
    argo.submit = None  # the new token is mounted
    await rig.at(67)
    assert [r.state for r in rig.outbox.rows()] == ["submitted"]


async def test_a_notifier_that_fails_is_counted_and_the_end_reply_waits_for_it() -> None:
    """Issue 10 #3: a connection drop at the end reply used to lose it for good (the row
    was marked ended first). Now the row stays open until the reply is posted."""
    slack_up = False

    def slack(command: Command) -> Outcome:
        return Posted("ts-1") if slack_up else Unavailable("connection reset")

    rig = Rig(Argo(running=0), slack)
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    await rig.at(62)
    assert rig.rows() == [("delete-pod", "submitted", None, None)]  # the end not yet told
    assert rig.counted("slack_errors") == 2  # act, re-act after the first poll; the end waits
    slack_up = True
    await rig.at(70)
    assert rig.rows() == [("delete-pod", "ended", "Succeeded", "ts-1")]
    told = [c.note for c in rig.slack.carried if isinstance(c, Tell)]
    assert [type(n).__name__ for n in told][-2:] == ["Acted", "Finished"]
    ended = rig.metrics.workflows_ended.labels(action="delete-pod", phase="Succeeded")
    assert ended._value.get() == 1


async def test_a_standby_carries_nothing_and_a_new_leader_expires_stale_rows() -> None:
    rig = Rig(Argo(), slack_ok(), leading=False)
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    assert rig.rows() == [("delete-pod", "pending", None, None)]  # written, not carried
    await rig.at(61 + 601)
    rig.worker.lead(True, "other-replica")
    await rig.at(61 + 602)
    assert [r.state for r in rig.outbox.rows()] == ["expired"]
    assert rig.argo.carried == []


async def test_a_fresh_row_taken_over_says_so() -> None:
    rig = Rig(Argo(running=0), slack_ok(), leading=False)
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    await rig.at(65)  # written before this replica led
    rig.worker.lead(True, "other-replica")
    await rig.at(70)
    acted = rig.slack.carried[0]
    assert isinstance(acted, Tell) and isinstance(acted.note, Acted)
    assert acted.note.decision.reason.endswith("(taken over from other-replica)")


async def test_dry_run_tells_what_it_would_have_done_and_executes_nothing() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY + "guardrails: {dry_run: {enabled: true}}\n")
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    assert rig.rows() == [("delete-pod", "dry", None, None)] and rig.argo.carried == []
    (tell,) = rig.slack.carried
    assert isinstance(tell, Tell) and isinstance(tell.note, WouldHave)
    assert tell.note.reason.startswith("dry-run: would delete-pod llm/vllm-0")


async def test_the_timer_loop_fires_on_virtual_time() -> None:
    """The driver's own loop, not a hand-called tick: it wakes at the policy's deadline."""
    rig = Rig(Argo(), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    timer = asyncio.create_task(rig.driver.timer(max_tick_s=3600.0))
    try:
        await rig.clock.advance(59)
        assert rig.rows() == []
        await rig.clock.advance(2)
        assert [r.state for r in rig.outbox.rows()] == ["pending"]
    finally:
        timer.cancel()


async def test_a_pending_delete_of_a_pod_that_went_away_is_dropped_not_submitted() -> None:
    """The budget lapses on a standby (it writes the row, only the leader acts); the pod goes
    (its DELETED, or a relist without it) before any submit was tried: the row is expired,
    and the leader-to-be submits nothing."""
    rig = Rig(Argo(), slack_ok(), leading=False)
    stuck = pod("vllm-0", started=T0)
    rig.feed(stuck)
    await rig.at(61)
    assert rig.rows() == [("delete-pod", "pending", None, None)]
    rig.feed(deleted(stuck, 70))
    rig.worker.lead(True, None)
    await rig.at(600)
    assert rig.rows() == [("delete-pod", "expired", None, None)]
    assert rig.outbox.rows()[0].error == "not executed: the pod was gone"
    assert rig.argo.carried == []  # nothing submitted for a pod no longer there


async def test_a_pod_gone_after_a_submit_was_tried_keeps_its_row() -> None:
    """Argo did not answer the submit (down, a timeout): the workflow may exist and may be what
    deleted the pod. The row stays and is submitted again once Argo is back (a 409 there is
    the workflow to follow; a new one's step finds the pod gone and deletes nothing)."""
    down = Argo(submit=Unavailable("argo down"))
    rig = Rig(down, slack_ok())
    stuck = pod("vllm-0", started=T0)
    rig.feed(stuck)
    await rig.at(61)
    rig.feed(deleted(stuck, 70))
    down.submit = None  # Argo is back
    for t in (600, 605, 610, 615):
        await rig.at(t)
    assert [r.state for r in rig.outbox.rows()] == ["ended"]
    assert sum(isinstance(c, Submit) for c in rig.argo.carried) == 2


def deleted(doc: dict[str, Any], at: float) -> dict[str, Any]:
    meta = {**doc["metadata"], "deletionTimestamp": iso(T0 + at), "deletionGracePeriodSeconds": 0}
    return {"type": "DELETED", "object": {**doc, "metadata": meta}}
