"""Issue 10 #6: every Slack message of an outbox row is posted once, never lost, and only
by the leader. The outbox worker on a virtual clock with the real SlackNotifier (slack_sdk)
against the Slack stand-in; Argo scripted with a Recorder. A "crash" is what the state file
holds when the process dies mid-post: the post taken by Slack, its ts never stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.executors.protocol import Command, Outcome, Refused, Submit
from remediator.executors.recorder import Recorder
from remediator.executors.slack import SlackNotifier
from remediator.guard.state import GuardState
from remediator.inputs.decode import normalize
from remediator.policy_file import load_policy
from remediator.runtime.clock import VirtualClock
from remediator.runtime.driver import Driver
from remediator.runtime.metrics import RuntimeMetrics
from remediator.runtime.outbox import Outbox, OutboxRows
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.session import Session
from tests.runtime.test_virtual_clock import POLICY, T0, Argo, pod
from tests.standins.fixtures import slack_config as standin_config
from tests.standins.fixtures import slack_fixture
from tests.standins.slack_server import SlackStandin

TOKEN = "xoxb-once-test"
CHANNEL = "C0REMEDIATE"


slack = slack_fixture(TOKEN)


class Replica:
    """One process: its outbox on the state file, its session, notifier and worker."""

    def __init__(
        self,
        tmp_path: Path,
        slack: SlackStandin,
        argo: Callable[[Command], Outcome],
        clock: VirtualClock,
        is_leader: Callable[[], bool] = lambda: True,
        **slack_config: Any,
    ) -> None:
        self.clock = clock
        self.outbox = Outbox(tmp_path / "state.db", clock.now)
        self.session = Session(load_policy(POLICY))
        self.metrics = RuntimeMetrics.on(CollectorRegistry())
        tmp_path.mkdir(parents=True, exist_ok=True)
        settings = {"retries": 2, "retry_initial_s": 0.01, **slack_config}  # 3 tries a message
        config = standin_config(slack, tmp_path / "slack-token", CHANNEL, TOKEN, **settings)
        self.argo = Recorder(argo)
        self.worker = Acting(
            OutboxRows(self.outbox),
            self.argo,
            SlackNotifier(config),  # a 429 here says Retry-After: 0
            clock,
            self.metrics,
            "me",
            WorkerSettings(poll_s=5.0),
            is_leader=is_leader,
        )
        self.worker.lead(True, None)
        self.driver = Driver(
            self.session,
            self.outbox,
            clock,
            self.metrics,
            leading=lambda: self.worker.leading,
            wake_worker=lambda: None,
            simulated=lambda held: None,
        )

    def feed(self, doc: dict[str, Any]) -> None:
        self.driver.feed(normalize(doc))

    async def at(self, t: float) -> None:
        await self.clock.advance(T0 + t - self.clock.now())
        self.driver.tick()
        await self.worker.step()
        await self.worker.idle()

    async def crash(self) -> None:
        await self.worker.close()
        self.outbox.close()


def acts(slack: SlackStandin) -> list[str]:
    return [p.ts for p in slack.posted() if "thread_ts" not in p.body and p.ts]


def replies(slack: SlackStandin, thread: str) -> list[str]:
    return [p.ts for p in slack.posted() if p.body.get("thread_ts") == thread and p.ts]


async def test_a_crash_between_the_post_and_storing_its_ts_does_not_post_twice(
    tmp_path: Path, slack: SlackStandin
) -> None:
    clock = VirtualClock(T0)
    first = Replica(tmp_path, slack, Argo(running=0), clock)
    first.feed(pod("vllm-0", started=T0))
    slack.drop_answer_next()  # Slack takes the act message; the process dies before its ts
    await first.at(61)
    await first.crash()
    assert len(acts(slack)) == 1

    second = Replica(tmp_path, slack, Argo(running=0), clock)  # the restart
    await second.at(62)
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1  # the end reply, in the one act message's thread
    (row,) = second.outbox.rows()
    assert (row.state, row.slack_ts, row.end_ts) == ("ended", act, replies(slack, act)[0])
    looked = [r.method for r in slack.requests if r.method.startswith("conversations.")]
    assert looked == ["conversations.history"]


async def test_an_end_reply_whose_answer_was_lost_is_not_posted_twice(
    tmp_path: Path, slack: SlackStandin
) -> None:
    clock = VirtualClock(T0)
    replica = Replica(tmp_path, slack, Argo(running=1), clock)
    replica.feed(pod("vllm-0", started=T0))
    await replica.at(61)  # submitted, act posted
    await replica.at(62)  # running
    slack.drop_answer_next()  # the end reply is taken, its answer lost
    await replica.at(67)  # the next try looks in the thread first, and finds it
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1
    assert [r.state for r in replica.outbox.rows()] == ["ended"]
    assert replica.outbox.rows()[0].end_ts == replies(slack, act)[0]
    looked = [r.method for r in slack.requests if r.method.startswith("conversations.")]
    assert looked == ["conversations.replies"]


async def test_an_unreadable_channel_posts_again_and_says_it_may_repeat(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """Without channels:history the look is refused: a repeat beats a lost message."""
    slack.history_scope = False
    clock = VirtualClock(T0)
    replica = Replica(tmp_path, slack, Argo(running=0), clock)
    replica.feed(pod("vllm-0", started=T0))
    slack.drop_answer_next()
    await replica.at(61)
    await replica.at(62)
    first, again = acts(slack)
    shown = str(slack.posted()[1].body["blocks"])
    assert "it may repeat" in shown
    assert len(replies(slack, again)) == 1


async def test_a_replica_whose_lease_lapsed_mid_row_posts_nothing(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """The Lease lapses while Argo is being called; nobody has told the worker yet."""
    leading = True
    argo = Argo(running=0)

    def lapsing(command: Command) -> Outcome:
        nonlocal leading
        if isinstance(command, Submit):
            leading = False
        return argo(command)

    clock = VirtualClock(T0)
    replica = Replica(tmp_path, slack, lapsing, clock, is_leader=lambda: leading)
    replica.feed(pod("vllm-0", started=T0))
    await replica.at(61)
    assert slack.posted() == []
    leading = True  # it leads again: the act and the end are told, once each
    await replica.at(62)
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1


async def test_a_notify_row_is_told_when_slack_is_back_not_dropped(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """A notify-only row used to end untold when Slack was unreachable."""
    clock = VirtualClock(T0)
    replica = Replica(tmp_path, slack, Argo(), clock)
    gpu = Decision("notify", "llm", "vllm-0", "Insufficient nvidia.com/gpu", "gpu-wait-1", T0)
    replica.outbox.record([gpu], GuardState())
    slack.rate_limit_next(times=3)  # every try of this pass: still rate limited
    await replica.at(1)
    assert [r.state for r in replica.outbox.rows()] == ["pending"]
    await replica.at(4)  # after the back-off
    assert [r.state for r in replica.outbox.rows()] == ["ended"]
    assert len(acts(slack)) == 1


async def test_a_could_not_left_untold_by_a_crash_is_told_after_the_restart(
    tmp_path: Path, slack: SlackStandin
) -> None:
    clock = VirtualClock(T0)
    first = Replica(tmp_path, slack, Argo(submit=Refused("template not found")), clock)
    first.feed(pod("vllm-0", started=T0))
    slack.rate_limit_next(times=3)  # Slack unreachable when the row fails; then a crash
    await first.at(61)
    await first.crash()
    assert slack.posted() == []

    second = Replica(tmp_path, slack, Argo(), clock)
    await second.at(62)
    (told,) = slack.posted()
    assert "Could not act" in told.body["text"]
    (row,) = second.outbox.rows()
    assert (row.state, row.end_ts) == ("failed", told.ts)
    assert second.argo.carried == []  # failed stays failed: only the telling is resumed


async def test_a_new_leader_does_not_repeat_what_the_old_one_posted(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """Two replicas, two outboxes, one Slack channel: the act message the old leader posted
    is found by the new one, which replies in its thread instead of posting it again."""
    clock = VirtualClock(T0)
    old = Replica(tmp_path / "a", slack, Argo(running=0), clock)
    new = Replica(tmp_path / "b", slack, Argo(running=0), clock)
    new.worker.lead(False, None)
    for replica in (old, new):
        replica.feed(pod("vllm-0", started=T0))
    for replica in (old, new):
        await replica.at(61)  # the leader submits and posts; the standby writes its row
    await old.crash()
    await new.at(65)  # the Lease expires a few seconds later
    new.worker.lead(True, "replica-a")
    await new.at(70)  # submitted again (Argo: 409, done), its act message found
    await new.at(71)  # ended: the reply goes into the old leader's thread
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1
    (row,) = new.outbox.rows()
    assert (row.state, row.slack_ts) == ("ended", act)
