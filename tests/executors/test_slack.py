"""The Slack notifier against the stand-in Slack Web API, through slack_sdk."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from remediator.executors.argo import Ended, Submitted
from remediator.executors.protocol import Acted, Spared, Tell
from remediator.executors.slack import SlackError, SlackNotifier
from tests.executors.conftest import delete_decision
from tests.standins.fixtures import slack_config, slack_fixture
from tests.standins.slack_server import SlackStandin

SLACK_TOKEN = "xoxb-test-1234-abcd"
CHANNEL = "C0REMEDIATE"


slack = slack_fixture(SLACK_TOKEN)


def notifier_for(slack: SlackStandin, tmp_path: Path, token: str = SLACK_TOKEN) -> SlackNotifier:
    return SlackNotifier(slack_config(slack, tmp_path / "slack-token", CHANNEL, token))


def submitted_for(name: str = "delete-pod-x-0123456789", created: bool = True) -> Submitted:
    return Submitted(
        name=name,
        namespace="argo",
        template="delete-stuck-inference-pod",
        incident="stuck-inference-vllm-llama-70b-0-0f1e2d3c",
        created=created,
        url=f"https://argo.example/workflows/argo/{name}",
    )


def _texts(blocks: list[dict[str, object]]) -> str:
    out: list[str] = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            out.append(str(text["text"]))
        for f in block.get("fields", []) or []:  # type: ignore[attr-defined]
            out.append(str(f["text"]))
        for e in block.get("elements", []) or []:  # type: ignore[attr-defined]
            out.append(str(e["text"]))
    return "\n".join(out)


async def test_act_posts_what_why_incident_and_link(slack: SlackStandin, tmp_path: Path) -> None:
    decision = delete_decision()
    ts = await notifier_for(slack, tmp_path).acted(decision, submitted_for())

    (posted,) = slack.posted()
    assert posted.ts == ts
    assert posted.authorization == f"Bearer {SLACK_TOKEN}"
    assert posted.body["channel"] == CHANNEL
    assert "thread_ts" not in posted.body
    shown = _texts(posted.body["blocks"])
    assert "delete-pod inference/vllm-llama-70b-0" in shown
    assert "engine_init 75s &gt; budget 60s (3 checks)" in shown  # escaped, not markup
    assert decision.incident in shown
    assert "<https://argo.example/workflows/argo/delete-pod-x-0123456789|" in shown
    assert posted.body["text"].startswith("delete-pod inference/vllm-llama-70b-0")


async def test_end_replies_in_the_incident_thread(slack: SlackStandin, tmp_path: Path) -> None:
    notifier = notifier_for(slack, tmp_path)
    decision = delete_decision()
    first = await notifier.acted(decision, submitted_for())
    ended = Ended(
        name="delete-pod-x-0123456789",
        phase="Succeeded",
        message="",
        started_at="2024-05-01T10:00:00Z",
        finished_at="2024-05-01T10:01:30Z",
    )
    await notifier.ended(decision.incident, ended)

    top, reply = slack.posted()
    assert top.ts == first
    assert reply.body["thread_ts"] == first
    assert reply.body["reply_broadcast"] is False
    assert "*Succeeded* in 1m30s" in _texts(reply.body["blocks"])


async def test_failed_end_is_broadcast_with_its_message(
    slack: SlackStandin, tmp_path: Path
) -> None:
    notifier = notifier_for(slack, tmp_path)
    decision = delete_decision()
    await notifier.acted(decision, submitted_for())
    ended = Ended("delete-pod-x-0123456789", "Failed", "pod <uid> mismatch", None, None)
    await notifier.ended(decision.incident, ended)

    reply = slack.posted()[-1]
    assert reply.body["reply_broadcast"] is True
    shown = _texts(reply.body["blocks"])
    assert "*Failed* in unknown duration" in shown
    assert "pod &lt;uid&gt; mismatch" in shown


async def test_incidents_get_their_own_threads(slack: SlackStandin, tmp_path: Path) -> None:
    notifier = notifier_for(slack, tmp_path)
    a = delete_decision(incident="incident-a")
    b = delete_decision(incident="incident-b")
    ts_a = await notifier.acted(a, submitted_for("a-1"))
    ts_b = await notifier.acted(b, submitted_for("b-1"))
    await notifier.ended("incident-b", Ended("b-1", "Succeeded", "", None, None))

    assert ts_a != ts_b
    assert slack.posted()[-1].body["thread_ts"] == ts_b
    assert notifier.thread_of("incident-a") == ts_a


async def test_a_pod_told_under_a_node_goes_into_the_nodes_thread_spared_too(
    slack: SlackStandin, tmp_path: Path
) -> None:
    """The acting component gives the node's message as the thread of a pod deleted there
    (`Decision.told_under`): the act, and a delete spared at the last look, reply under it;
    without a thread given, a spared delete stands alone in the channel, as before."""
    notifier = notifier_for(slack, tmp_path)
    node = await notifier.acted(delete_decision(action="notify", incident="gpu-memory-3"))
    pod = delete_decision(incident="stuck-a", told_under="gpu-memory-3")
    await notifier.carry(Tell(Acted(pod, submitted_for()), node))
    await notifier.carry(Tell(Spared(pod, "Ready now"), node))
    await notifier.carry(Tell(Spared(pod, "Ready now")))
    _, act, spared, alone = slack.posted()
    assert act.body["thread_ts"] == node and spared.body["thread_ts"] == node
    assert "thread_ts" not in alone.body
    assert "Spared" in spared.body["text"]


async def test_429_waits_retry_after_then_posts(
    slack: SlackStandin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="remediator.executors.slack")
    slack.rate_limit_next(retry_after_s=1)
    decision = delete_decision()
    ts = await notifier_for(slack, tmp_path).acted(decision, submitted_for())

    assert [r.status for r in slack.requests] == [429, 200]
    assert slack.posted()[0].ts == ts
    (waited,) = [r for r in caplog.records if r.getMessage() == "slack call failed, retrying"]
    assert waited.retry_in_s == 1.0  # type: ignore[attr-defined]
    assert waited.cause == "ratelimited"  # type: ignore[attr-defined]
    assert waited.incident == decision.incident  # type: ignore[attr-defined]


async def test_429_beyond_the_retry_budget_is_a_clear_error(
    slack: SlackStandin, tmp_path: Path
) -> None:
    slack.rate_limit_next(retry_after_s=0, times=9)
    with pytest.raises(SlackError, match=r"ratelimited \(429\)"):
        await notifier_for(slack, tmp_path).acted(delete_decision(), submitted_for())
    assert len(slack.requests) == 5  # the first try and SlackConfig.retries (4), no more


async def test_bad_token_is_a_clear_error_that_never_shows_the_token(
    slack: SlackStandin, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    notifier = notifier_for(slack, tmp_path, token="xoxb-wrong-5678")
    with pytest.raises(SlackError, match="invalid_auth") as err:
        await notifier.acted(delete_decision(), submitted_for())
    assert "xoxb-wrong-5678" not in str(err.value)
    assert "xoxb-wrong-5678" not in caplog.text
    assert slack.posted() == []


async def test_notify_only_decision_says_so(slack: SlackStandin, tmp_path: Path) -> None:
    decision = delete_decision(
        action="notify", reason="FailedScheduling: 0/8 nodes: Insufficient nvidia.com/gpu"
    )
    await notifier_for(slack, tmp_path).acted(decision)

    shown = _texts(slack.posted()[0].body["blocks"])
    assert "none (notify only)" in shown
    assert "Insufficient nvidia.com/gpu" in shown
