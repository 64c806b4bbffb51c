"""The executor agent, fed through Faust's own test context (no broker): a command is
carried once under its deterministic workflow name, a redelivered one records nothing."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision
from remediator.policy_file import PolicyFile
from remediator.runtime.outbox import decision_to_json
from remediator.streams.app import build_app
from remediator.streams.config import StreamsConfig
from remediator.streams.executor import DryRunRecorder


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
