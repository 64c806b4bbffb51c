"""Issue 10 #10: no text from outside (pod names, reasons, GPU verdicts, workflow names,
URLs and messages) becomes Slack markup. Hypothesis writes the strings; the real
slack_sdk client posts them to the Slack stand-in, which captures what Slack would parse."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision
from remediator.executors.protocol import (
    Acted,
    CouldNot,
    Ended,
    Finished,
    Note,
    Submitted,
    WouldHave,
)
from remediator.executors.slack import SlackNotifier
from tests.standins.fixtures import slack_config, slack_fixture
from tests.standins.slack_server import SlackStandin

TOKEN = "xoxb-escape-test"
CHANNEL = "C0REMEDIATE"
NASTY = ["<!channel>", "<!here>", "<@U123>", "<#C999|x>", "<http://evil|click>", "&lt;!here&gt;"]
NASTY += ["&", "<", ">", "|", "`", "*", "\n", "&amp;"]
text = st.one_of(
    st.text(max_size=40),
    st.lists(st.sampled_from(NASTY) | st.text(max_size=5), max_size=6).map("".join),
)
_LINK = re.compile(r"<([^<>|\s]*)\|([^<>]*)>")  # the one sequence we write: <url|label>
_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")  # an & that does not start one of the three


def mrkdwn(body: dict[str, Any]) -> list[str]:
    """Every text Slack parses as mrkdwn: the fallback text and the blocks' mrkdwn texts."""
    found = [str(body["text"])]
    for block in body["blocks"]:
        parts = [block.get("text"), *block.get("fields", []), *block.get("elements", [])]
        found += [p["text"] for p in parts if isinstance(p, dict) and p["type"] == "mrkdwn"]
    return found


def assert_inert(posted: str) -> None:
    """Our links only; nothing else Slack would parse as a control sequence or decode."""
    for link in _LINK.finditer(posted):
        assert not re.search(r"&(?!amp;)", link.group(1)), posted
    bare = _LINK.sub("", posted).removeprefix("> ")  # and our own quote of a message
    assert "<" not in bare and ">" not in bare, posted  # no mention, no link, no command
    assert not _ENTITY.search(bare), posted  # no & that Slack would decode


def notifier_for(slack: SlackStandin, token: Path) -> SlackNotifier:
    return SlackNotifier(slack_config(slack, token, CHANNEL, TOKEN))


def notes(d: Decision, name: str, url: str, message: str, phase: str) -> list[Note]:
    submitted = Submitted(name, d.namespace, "t", d.incident, True, url)
    ended = Ended(name, phase, message, None, None, url)
    return [
        Acted(d, submitted),
        Acted(d, None),
        Finished(d, ended),
        WouldHave(d, message),
        CouldNot(d, message),
    ]


slack = slack_fixture(TOKEN)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    namespace=text,
    target=text,
    reason=text,
    incident=text,
    name=text,
    url=st.sampled_from(["", "https://argo.example/workflows/argo/"]).flatmap(
        lambda base: text.map(lambda tail: base + tail if base else "")
    ),
    message=text,
    phase=text,
)
def test_no_outside_string_becomes_slack_markup(
    tmp_path_factory: pytest.TempPathFactory,
    namespace: str,
    target: str,
    reason: str,
    incident: str,
    name: str,
    url: str,
    message: str,
    phase: str,
) -> None:
    d = Decision("delete-pod", namespace, target, reason, incident or "i", 1_714_557_600.0)

    async def post_all(notifier: SlackNotifier) -> None:
        for note in notes(d, name, url, message, phase):
            await notifier.tell(note)

    with SlackStandin(token=TOKEN) as slack:  # a server per example: nothing carried over
        asyncio.run(post_all(notifier_for(slack, tmp_path_factory.mktemp("slack") / "token")))
    posted = [r for r in slack.requests if r.ts is not None]
    assert len(posted) == 5  # every note accepted (the stand-in checks the Block Kit shape)
    for p in posted:
        for shown in mrkdwn(p.body):
            assert_inert(shown)


def test_a_gpu_verdict_mention_reaches_the_channel_as_text(
    slack: SlackStandin, tmp_path: Path
) -> None:
    """The report: `<!channel>` inside a GPU verdict reached the channel (fallback text)."""
    reason = "GPU 3: memory did not settle <!channel> & <@U123>"
    d = Decision("notify", "llm", "gpu-node-7", reason, "gpu-verdict-1", 1_714_557_600.0)
    asyncio.run(notifier_for(slack, tmp_path / "token").tell(Acted(d)))
    (posted,) = slack.requests
    assert "&lt;!channel&gt; &amp; &lt;@U123&gt;" in posted.body["text"]
    assert all("<!channel>" not in t for t in mrkdwn(posted.body))
