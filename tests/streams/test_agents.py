"""The executor agent, fed through Faust's own test context (no broker): a command is
carried once under its deterministic workflow name, a redelivered one records nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.executors.slack import SlackConfig, SlackNotifier
from remediator.policy_file import PolicyFile
from remediator.runtime.outbox import decision_to_json
from remediator.streams.app import build_app
from remediator.streams.config import StreamsConfig
from remediator.streams.executor import DryRunRecorder, TellingCarrier
from tests.standins.slack_server import SlackStandin

SLACK_TOKEN = "xoxb-kafka-test"


def agent(app, name: str):
    (found,) = [a for key, a in app.agents.items() if key.endswith(f".{name}")]
    return found


async def test_the_executor_agent_carries_each_command_once(tmp_path: Path) -> None:
    log = tmp_path / "dry-run.jsonl"
    registry = CollectorRegistry()
    app = build_app(
        StreamsConfig(tick_s=0, table_dir=str(tmp_path)), PolicyFile(), DryRunRecorder(str(log)),
        registry,
    )  # fmt: skip
    delete = Decision("delete-pod", "llm", "vllm-0", "stuck", "stuck-abc", 100.0, uid="u1")
    notify = Decision("notify", "llm", "vllm-0", "stuck", "stuck-abc", 100.0, uid="u1")
    async with agent(app, "executor").test_context() as executor:
        for d in (delete, notify, delete):  # the last one: redelivered after a crash
            await executor.put(decision_to_json(d).encode(), key=d.incident.encode())
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["action"] for x in lines] == ["delete-pod", "notify"]
    assert lines[0]["workflow"].startswith("delete-pod-stuck-abc-")
    recorded = registry.get_sample_value(
        "remediator_kafka_commands_total", {"action": "delete-pod", "status": "recorded"}
    )
    again = registry.get_sample_value(
        "remediator_kafka_commands_total", {"action": "delete-pod", "status": "exists"}
    )
    assert (recorded, again) == (1.0, 1.0)


async def test_the_executor_agent_tells_slack_once_per_command_it_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack stand-in (no real Slack can run here), real slack_sdk client: each command the
    agent carried is told once, a notify as its notice; the redelivered one tells nothing."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    with SlackStandin(token=SLACK_TOKEN, channels=frozenset({"C0KAFKA"})) as slack:
        notifier = SlackNotifier(SlackConfig(channel="C0KAFKA", base_url=slack.url))
        carrier = TellingCarrier(DryRunRecorder(str(tmp_path / "dry-run.jsonl")), notifier)
        app = build_app(StreamsConfig(tick_s=0, table_dir=str(tmp_path)), PolicyFile(), carrier,
                        CollectorRegistry())  # fmt: skip
        delete = Decision("delete-pod", "llm", "vllm-0", "stuck <!channel>", "stuck-abc", 1.0,
                          uid="u1")  # fmt: skip
        notify = Decision("notify", "llm", "vllm-1", "no GPU", "sched-def", 1.0, uid="u2")
        async with agent(app, "executor").test_context() as executor:
            for d in (delete, notify, delete):  # the last one: redelivered after a crash
                await executor.put(decision_to_json(d).encode(), key=d.incident.encode())
        texts = [p.body["text"] for p in slack.posted()]
    assert len(texts) == 2, texts
    assert "delete-pod" in texts[0] and "llm/vllm-0" in texts[0]
    assert "<!channel>" not in texts[0] and "&lt;!channel&gt;" in str(slack.posted()[0].body)
    assert "llm/vllm-1" in texts[1]
