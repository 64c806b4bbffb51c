"""The Kafka executor's Slack side: the real ArgoExecutor against the Argo stand-in and the
real slack_sdk against the Slack stand-in (neither server can run here). A workflow it created
is told when created and, once Argo says it ended, how it ended, in the act message's thread;
a redelivered command tells nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from remediator.executors.argo import ArgoExecutor, Backoff
from remediator.executors.slack import SlackConfig, SlackNotifier
from remediator.streams.executor import ArgoCarrier, TellingCarrier
from tests.executors.conftest import config_for, delete_decision
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import slack_fixture
from tests.standins.slack_server import SlackStandin

SLACK_TOKEN = "xoxb-kafka-end-test"
CHANNEL = "C0KAFKA"


slack = slack_fixture(SLACK_TOKEN, frozenset({CHANNEL}), token_env=True)


def telling(argo: ArgoStandin, token_file: Path, slack: SlackStandin) -> TellingCarrier:
    """The real Argo executor (also the follower) and the real Slack notifier, on stand-ins."""
    executor = ArgoExecutor(config_for(argo, token_file), backoff=Backoff(initial_s=0.01))
    notifier = SlackNotifier(SlackConfig(channel=CHANNEL, base_url=slack.url))
    return TellingCarrier(ArgoCarrier(executor), notifier, follow=executor, poll_s=0.01)


async def two_posts(slack: SlackStandin) -> None:
    """The act message and the end reply (the stand-in moves a workflow a phase per GET)."""
    for _ in range(500):
        if len(slack.posted()) == 2:
            return
        await asyncio.sleep(0.01)


async def test_a_created_workflow_is_told_then_followed_to_its_end_in_the_thread(
    argo: ArgoStandin, token_file: Path, slack: SlackStandin
) -> None:
    carrier = telling(argo, token_file, slack)
    decision = delete_decision()
    first = await carrier.carry(decision)
    again = await carrier.carry(decision)  # redelivered after a crash: Argo says it exists
    assert (first.status, again.status) == ("created", "exists")
    await two_posts(slack)
    act, end = slack.posted()
    assert "delete-pod" in act.body["text"] and "thread_ts" not in act.body
    assert end.body["thread_ts"] == act.ts and "Succeeded" in end.body["text"]


async def test_a_failed_workflow_is_told_as_failed(
    argo: ArgoStandin, token_file: Path, slack: SlackStandin
) -> None:
    carrier = telling(argo, token_file, slack)
    decision = delete_decision()
    out = await carrier.carry(decision)
    assert out.name is not None
    argo.script(out.name, "Running", "Failed", message="pod not found")
    await two_posts(slack)
    end = slack.posted()[1]
    assert "Failed" in end.body["text"] and end.body["thread_ts"] == slack.posted()[0].ts
