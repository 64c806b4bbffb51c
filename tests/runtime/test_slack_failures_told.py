"""Issue 18 #4, in the outbox worker: a deletion is told (its act message, then the end reply
in its thread) whatever Slack answered on the way, and a failure is counted by class and
logged with the incident. The real SlackNotifier (slack_sdk) against the Slack stand-in,
which scripts each failure (Slack itself cannot run here); Argo scripted with a Recorder;
the worker on a virtual clock. Each message gets three tries a pass (`Replica`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from remediator.runtime.clock import VirtualClock
from tests.executors.test_slack import _texts
from tests.runtime.test_slack_once import TOKEN, Replica, acts, replies
from tests.runtime.test_virtual_clock import T0, Argo, pod
from tests.standins.fixtures import slack_fixture
from tests.standins.slack_server import Answer, SlackStandin

slack = slack_fixture(TOKEN)


def errors(replica: Replica, reason: str) -> float:
    value = replica.metrics.slack_errors.labels(reason=reason)._value.get()
    return float(value)


@pytest.mark.parametrize("fault", ["internal_error", "fatal_error", "html", "cut_off"])
async def test_a_deletion_is_told_through_a_slack_that_fails_once_a_message(
    fault: str, tmp_path: Path, slack: SlackStandin
) -> None:
    """The first try of each message fails: both still go out, once each, in one thread."""
    replica = Replica(tmp_path, slack, Argo(running=0), clock=VirtualClock(T0))
    replica.feed(pod("vllm-0", started=T0))
    slack.fail_next(fault)
    await replica.at(61)  # submitted; the act message told
    slack.fail_next(fault)
    await replica.at(62)  # ended; the end reply told
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1
    (row,) = replica.outbox.rows()
    assert (row.state, row.slack_ts) == ("ended", act)


async def test_a_lasting_slack_error_is_counted_logged_and_told_once_slack_is_back(
    tmp_path: Path, slack: SlackStandin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="remediator.runtime")
    replica = Replica(tmp_path, slack, Argo(running=0), clock=VirtualClock(T0))
    replica.feed(pod("vllm-0", started=T0))
    slack.fail_next("internal_error", times=6)  # every try of two passes
    await replica.at(61)
    await replica.at(62)
    assert slack.posted() == []
    assert [r.state for r in replica.outbox.rows()] == ["submitted"]  # open: not told yet
    assert errors(replica, "slack_error") == 2
    failed = [r for r in caplog.records if r.getMessage() == "slack failed"]
    assert failed and {r.incident for r in failed} == {replica.outbox.rows()[0].incident}  # type: ignore[attr-defined]
    await replica.at(67)  # Slack is back
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1
    assert [r.state for r in replica.outbox.rows()] == ["ended"]


async def test_an_end_waits_for_its_act_message_rather_than_going_out_alone(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """The act post fails at its last try, on the pass that sees the workflow end: the end
    reply used to go out unthreaded and the row end with no act message at all."""
    replica = Replica(tmp_path, slack, Argo(running=0), clock=VirtualClock(T0))
    replica.feed(pod("vllm-0", started=T0))
    slack.fail_next("service_unavailable", times=6)  # the act: every try of two passes
    await replica.at(61)
    await replica.at(62)  # the workflow has ended; the act still not through
    assert slack.posted() == []
    await replica.at(67)
    (act,) = acts(slack)
    assert len(replies(slack, act)) == 1  # in the act's thread
    assert len(slack.posted()) == 2


async def test_an_end_with_no_act_message_carries_the_context_itself(
    tmp_path: Path, slack: SlackStandin
) -> None:
    """Slack refuses the act message for good (here: its blocks): the end reply, with no
    thread to go into, says what was done, to what, why, and the incident."""
    refused = Answer(200, json.dumps({"ok": False, "error": "invalid_blocks"}).encode())
    replica = Replica(tmp_path, slack, Argo(running=0), clock=VirtualClock(T0))
    replica.feed(pod("vllm-0", started=T0))
    slack.answer_next(refused)
    await replica.at(61)
    slack.answer_next(refused)
    await replica.at(62)
    assert errors(replica, "refused") == 2
    (alone,) = slack.posted()
    assert "thread_ts" not in alone.body
    (row,) = replica.outbox.rows()
    shown = _texts(alone.body["blocks"])
    for part in ("delete-pod", "llm/vllm-0", row.incident, "engine_init", "*Succeeded*"):
        assert part in shown
    assert (row.state, row.end_ts) == ("ended", alone.ts)
