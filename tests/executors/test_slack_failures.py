"""Issue 18 #4: every way Slack (or a proxy in front of it) fails, through the real slack_sdk
client against the Slack stand-in. Slack itself cannot run here, so each failure class is
scripted there (tests/standins/slack_server.py, FAULTS). A transient failure is retried until
the notifier's deadline (or tries) run out, then answered Unavailable with its class; a
permanent one is Refused at once; whatever Slack answers, `carry` returns Posted,
Unavailable or Refused and never raises."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediator.executors.protocol import (
    Acted,
    Ended,
    Finished,
    Posted,
    Refused,
    Tell,
    Unavailable,
)
from remediator.executors.slack import SlackNotifier
from tests.executors.conftest import delete_decision
from tests.executors.test_slack import _texts, submitted_for
from tests.standins.fixtures import slack_config, slack_fixture
from tests.standins.slack_server import FAULTS, Answer, SlackStandin

TOKEN = "xoxb-failures-test"
CHANNEL = "C0REMEDIATE"
TRANSIENT = sorted(FAULTS)  # every scripted class is one a later try can get past


slack = slack_fixture(TOKEN)


def notifier(
    slack: SlackStandin, tmp_path: Path, token: str = TOKEN, **cfg: float
) -> SlackNotifier:
    config = slack_config(
        slack,
        tmp_path / "slack-token",
        CHANNEL,
        token,
        timeout_s=1,  # the "slow" class answers after 2.5 s
        retry_initial_s=0.01,
        **cfg,  # type: ignore[arg-type]
    )
    return SlackNotifier(config)


def act() -> Tell:
    return Tell(Acted(delete_decision(), submitted_for()))


def posts(slack: SlackStandin) -> list[str]:
    return [p.ts for p in slack.posted() if p.method == "chat.postMessage" and p.ts]


@pytest.mark.parametrize("fault", TRANSIENT)
async def test_each_transient_failure_is_retried_and_posts_once(
    fault: str, slack: SlackStandin, tmp_path: Path
) -> None:
    slack.fail_next(fault)
    out = await notifier(slack, tmp_path).carry(act())
    assert isinstance(out, Posted)
    assert posts(slack) == [out.ts]  # one message, even where the first try was taken


@pytest.mark.parametrize("fault", ["internal_error", "html", "server_error", "cut_off", "reset"])
async def test_a_failure_that_lasts_is_unavailable_with_its_class_after_the_tries(
    fault: str, slack: SlackStandin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="remediator.executors.slack")
    slack.fail_next(fault, times=50)
    out = await notifier(slack, tmp_path, retries=2).carry(act())
    assert isinstance(out, Unavailable), out
    assert out.cause and out.cause != "refused"
    retried = [r for r in caplog.records if r.getMessage() == "slack call failed, retrying"]
    assert len(retried) == 2  # the first try and two more (looks first, where unsure)
    assert {r.incident for r in retried} == {act().note.decision.incident}  # type: ignore[attr-defined]
    assert {r.cause for r in retried} == {out.cause}  # type: ignore[attr-defined]


async def test_retries_stop_at_the_deadline(slack: SlackStandin, tmp_path: Path) -> None:
    slack.fail_next("internal_error", times=50)
    out = await notifier(slack, tmp_path, retries=50, retry_deadline_s=0.0).carry(act())
    assert isinstance(out, Unavailable)
    assert len(slack.requests) == 1  # the next wait would end past the deadline: no retry


@pytest.mark.parametrize("code", ["channel_not_found", "invalid_blocks", "not_in_channel"])
async def test_a_permanent_error_is_refused_at_once(
    code: str, slack: SlackStandin, tmp_path: Path
) -> None:
    slack.answer_next(Answer(200, json.dumps({"ok": False, "error": code}).encode()))
    out = await notifier(slack, tmp_path).carry(act())
    assert isinstance(out, Refused) and code in out.reason
    assert out.cause == "refused"
    assert len(slack.requests) == 1


async def test_a_bad_token_is_refused_at_once(slack: SlackStandin, tmp_path: Path) -> None:
    out = await notifier(slack, tmp_path, token="xoxb-wrong").carry(act())
    assert isinstance(out, Refused) and "invalid_auth" in out.reason
    assert len(slack.requests) == 1


async def test_an_end_told_alone_carries_what_was_done_to_what_why_and_the_incident(
    slack: SlackStandin, tmp_path: Path
) -> None:
    """With no act message to reply under, the end reply says everything itself."""
    d = delete_decision()
    ended = Ended("delete-pod-x-0123456789", "Succeeded", "", None, None, "https://argo/x")
    out = await notifier(slack, tmp_path).carry(Tell(Finished(d, ended)))
    assert isinstance(out, Posted)
    (posted,) = slack.posted()
    assert "thread_ts" not in posted.body
    shown = _texts(posted.body["blocks"])
    for part in ("delete-pod", "inference/vllm-llama-70b-0", d.incident, "engine_init 75s"):
        assert part in shown
    assert "*Succeeded*" in shown


# --- any answer at all ---------------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["ok", "ts", "error", "channel", "messages"]), inner)
    ),
    max_leaves=10,
)
_bodies = st.one_of(
    _json_values.map(lambda v: json.dumps(v).encode()),
    _json_values.map(lambda v: json.dumps(v).encode()[:-1]),  # cut off
    st.binary(max_size=64),
)
_answers = st.builds(
    Answer,
    status=st.sampled_from([200, 200, 200, 400, 403, 404, 408, 429, 500, 502, 503]),
    body=_bodies,
    ctype=st.sampled_from(
        ["application/json; charset=utf-8", "text/html", "text/plain", "application/gzip"]
    ),
    taken=st.booleans(),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(answers=st.lists(_answers, min_size=1, max_size=3), unsure=st.booleans())
def test_whatever_slack_answers_carry_never_raises(
    answers: list[Answer], unsure: bool, slack: SlackStandin, tmp_path: Path
) -> None:
    for a in answers:
        slack.answer_next(a)
    since = 1_700_000_000.0 if unsure else None  # the first call is then a history read
    command = Tell(Acted(delete_decision(), submitted_for()), unsure_since=since)
    out = asyncio.run(notifier(slack, tmp_path, retries=1).carry(command))
    assert isinstance(out, Posted | Unavailable | Refused)
    slack.reset()
