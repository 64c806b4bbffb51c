"""The Kafka worker's acting: the acting component over the table store (the changelog
kept as a dict, no broker: tests/kafka/test_acting.py runs it on a real one), carried by
the worker's executors: the dry-run recorder, the real ArgoExecutor against the Argo
stand-in and the real slack_sdk against the Slack stand-in (neither server can run here).

A command is carried once under its deterministic workflow name however often it comes; a
workflow created is told, followed to its end and its end replied in the act message's
thread; a redelivered command tells nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.codec import DecodeError, encode
from remediator.contract.decision import Decision, Suppressed
from remediator.executors import argo_params
from remediator.executors.argo import ArgoExecutor, Backoff
from remediator.executors.protocol import Executor, Submit, Tell, WouldHave
from remediator.executors.slack import SlackConfig, SlackNotifier
from remediator.runtime.clock import VirtualClock
from remediator.runtime.metrics import ActingCounters
from remediator.runtime.worker import Acting, WorkerSettings
from remediator.streams.executor import DryRunRecorder, read_command, would_have
from remediator.streams.rows import TableRows
from tests.executors.conftest import config_for, delete_decision
from tests.runtime.test_acting_contract import Changelog
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import slack_fixture
from tests.standins.slack_server import SlackStandin

SLACK_TOKEN = "xoxb-kafka-test"
CHANNEL = "C0KAFKA"
T0 = 1_750_000_000.0

slack = slack_fixture(SLACK_TOKEN, frozenset({CHANNEL}), token_env=True)


class Worker:
    """One worker's rows (partition 0) and its acting component, on a virtual clock."""

    def __init__(self, cluster: Executor, notifier: Executor | None) -> None:
        self.clock, self.changelog = VirtualClock(T0), Changelog()
        self.registry = CollectorRegistry()
        self.rows = TableRows({}, self.changelog.write, self.clock.now)
        self.acting = Acting(self.rows, cluster, notifier, self.clock,
                             ActingCounters.on(self.registry), "w", WorkerSettings(poll_s=1.0),
                             )  # fmt: skip
        self.acting.lead(True, None)

    async def take(self, d: Decision) -> None:
        """What the executor agent does with a command."""
        row = await self.rows.add(d, 0)
        if row is not None:
            await self.acting.act_now(row)

    async def passes(self, n: int) -> None:
        for _ in range(n):
            await self.clock.advance(1.0)
            await self.acting.step()
            await self.acting.idle()


async def test_the_dry_run_records_each_command_once(tmp_path: Path) -> None:
    log = tmp_path / "dry-run.jsonl"
    recorder = DryRunRecorder(str(log))
    worker = Worker(recorder, recorder)  # no Slack: the recorder takes the notices too
    delete = Decision("delete-pod", "llm", "vllm-0", "stuck", "stuck-abc", 100.0, uid="u1")
    notify = Decision("notify", "llm", "vllm-0", "stuck", "stuck-abc", 100.0, uid="u1")
    for d in (delete, notify, delete):  # the last one: redelivered after a crash
        await worker.take(d)
    await worker.passes(3)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [x["action"] for x in lines] == ["delete-pod", "notify"]
    assert lines[0]["workflow"].startswith("delete-pod-stuck-abc-")
    assert lines[1]["workflow"] == "notify-stuck-abc"
    assert await worker.rows.open_rows() == []
    ended = worker.registry.get_sample_value(
        "remediator_workflows_ended_total", {"action": "delete-pod", "phase": "Recorded"}
    )
    assert ended == 1.0


async def test_a_second_recorder_on_the_file_records_nothing_again(tmp_path: Path) -> None:
    """Two workers share the file as they share Argo: a command redelivered to the other
    worker is a 409 there (created=False), and no second line."""
    log = str(tmp_path / "dry-run.jsonl")
    first, second = Worker(DryRunRecorder(log), None), Worker(DryRunRecorder(log), None)
    await first.take(delete_decision())
    await second.take(delete_decision())
    assert len(Path(log).read_text().splitlines()) == 1
    duplicate = second.registry.get_sample_value(
        "remediator_executions_total", {"action": "delete-pod", "result": "duplicate"}
    )
    assert duplicate == 1.0


async def test_recorders_sharing_the_file_record_each_name_once_whoever_wrote_it(
    tmp_path: Path,
) -> None:
    """Each recorder reads only what was appended since its last look: what the other
    wrote in between still counts, and a file replaced by a shorter one is read anew."""
    log = tmp_path / "dry-run.jsonl"
    first, second = DryRunRecorder(str(log)), DryRunRecorder(str(log))
    a = delete_decision(incident="stuck-a", target="vllm-a")
    b = delete_decision(incident="stuck-b", target="vllm-b")
    c = delete_decision(incident="stuck-c", target="vllm-c")
    created = [
        await first.carry(Submit(a)),
        await second.carry(Submit(b)),
        await first.carry(Submit(b)),  # the other wrote it after first's last look
        await second.carry(Submit(a)),
        await first.carry(Submit(c)),
        await second.carry(Submit(c)),
    ]
    assert [getattr(o, "created", None) for o in created] == [True, True, False, False, True, False]
    lines = [json.loads(x)["incident"] for x in log.read_text().splitlines()]
    assert lines == ["stuck-a", "stuck-b", "stuck-c"]
    log.write_text(json.dumps({"workflow": "other", "incident": "x", "action": "notify"}) + "\n")
    d = delete_decision(incident="stuck-d", target="vllm-d")
    assert getattr(await first.carry(Submit(d)), "created", None) is True
    assert getattr(await second.carry(Submit(d)), "created", None) is False
    assert [json.loads(x)["incident"] for x in log.read_text().splitlines()] == ["x", "stuck-d"]
    # Replaced by a longer file (a new inode) that has it: read from its start.
    e = delete_decision(incident="stuck-e", target="vllm-e")
    names = [*"uvwxyz", argo_params.workflow_name(e)]
    replacement = tmp_path / "replacement.jsonl"
    replacement.write_text("".join(json.dumps({"workflow": n}) + "\n" for n in names))
    replacement.replace(log)
    assert getattr(await first.carry(Submit(e)), "created", None) is False


async def test_a_created_workflow_is_told_then_followed_to_its_end_in_the_thread(
    argo: ArgoStandin, token_file: Path, slack: SlackStandin
) -> None:
    executor = ArgoExecutor(config_for(argo, token_file), backoff=Backoff(initial_s=0.01))
    notifier = SlackNotifier(SlackConfig(channel=CHANNEL, base_url=slack.url))
    worker = Worker(executor, notifier)
    decision = delete_decision()
    await worker.take(decision)
    await worker.take(decision)  # redelivered after a crash: its row is there
    await worker.passes(8)  # the stand-in moves a workflow on a phase per GET
    act, end = slack.posted()
    assert "delete-pod" in act.body["text"] and "thread_ts" not in act.body
    assert end.body["thread_ts"] == act.ts and "Succeeded" in end.body["text"]
    assert await worker.rows.open_rows() == []


async def test_a_failed_workflow_is_told_as_failed(
    argo: ArgoStandin, token_file: Path, slack: SlackStandin
) -> None:
    executor = ArgoExecutor(config_for(argo, token_file), backoff=Backoff(initial_s=0.01))
    notifier = SlackNotifier(SlackConfig(channel=CHANNEL, base_url=slack.url))
    worker = Worker(executor, notifier)
    await worker.take(delete_decision())
    (row,) = await worker.rows.open_rows()
    assert row.workflow is not None
    argo.script(row.workflow, "Running", "Failed", message="pod not found")
    await worker.passes(8)
    act, end = slack.posted()
    assert "Failed" in end.body["text"] and end.body["thread_ts"] == act.ts


def test_a_dry_runs_would_have_crosses_the_commands_topic_as_a_tell() -> None:
    """The guard sends a dry run's "would have" to the commands topic, through the codec;
    the executor agent reads it apart from a decision, and refuses a bad record whole."""
    decision = delete_decision()
    held = Suppressed(decision, "dry_run", "dry run: would delete", None, True)
    told = read_command(would_have(held))
    assert told == Tell(WouldHave(decision, "dry run: would delete"))
    assert read_command(encode(decision)) == decision
    with pytest.raises(DecodeError):
        read_command(would_have(held).replace(b'"WouldHave"', b'"Exploded"'))
    with pytest.raises(DecodeError):
        read_command(b'{"action": "explode-pod"}')


async def test_a_workers_rows_are_counted_by_state_as_serves_outbox(tmp_path: Path) -> None:
    from remediator.runtime.metrics import OutboxCollector

    recorder = DryRunRecorder(None)
    worker = Worker(recorder, recorder)
    worker.registry.register(OutboxCollector(worker.rows))
    await worker.take(delete_decision())
    await worker.take(delete_decision(incident="other"))

    def rows(state: str) -> float | None:
        return worker.registry.get_sample_value("remediator_outbox_rows", {"state": state})

    assert (rows("submitted"), rows("ended")) == (2.0, 0.0)
    await worker.passes(2)
    assert (rows("submitted"), rows("ended")) == (0.0, 2.0)
