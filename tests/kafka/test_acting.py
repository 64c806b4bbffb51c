"""A Kafka worker acts durably: SIGKILLed while it follows a workflow, the worker started
after it restores the acting table from its changelog and follows the workflow to its end,
replying the end under the act message; nothing is submitted or told twice.

Real: the broker, faust-streaming, the worker process, the ArgoExecutor and the
slack_sdk client. Stand-ins (no real Slack can run here, and the Argo stand-in holds a
workflow Running as long as the test needs): Argo and Slack, both on loopback in this
process.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiokafka import AIOKafkaProducer

from remediator.contract.codec import encode
from remediator.streams.topics import ensure_topics
from tests.executors.conftest import delete_decision
from tests.kafka.harness import Worker, config, until
from tests.standins.argo_server import ArgoStandin
from tests.standins.slack_server import SlackStandin

ARGO_TOKEN = "argo-kafka-acting"
SLACK_TOKEN = "xoxb-kafka-acting"
CHANNEL = "C0KAFKA"
# No pod exists to be looked at again before the delete (tests/streams/test_worker_cli.py).
ENV = {"ARGO_TOKEN": ARGO_TOKEN, "SLACK_BOT_TOKEN": SLACK_TOKEN, "SLACK_CHANNEL": CHANNEL,
       "REMEDIATOR_LOOK_AGAIN": "off"}  # fmt: skip


def stand_ins() -> tuple[ArgoStandin, SlackStandin]:
    argo = ArgoStandin(token=ARGO_TOKEN)
    argo.default_script = ("Pending", "Running")  # runs until the test ends it
    return argo, SlackStandin(token=SLACK_TOKEN, channels=frozenset({CHANNEL}))


async def test_a_worker_killed_mid_follow_is_followed_to_the_end_by_the_next(
    bootstrap: str, tmp_path: Path
) -> None:
    cfg = config(bootstrap, "acting", partitions=2)
    await ensure_topics(cfg)
    env = dict(ENV)
    decision = delete_decision()
    with (
        ArgoStandin(token=ARGO_TOKEN) as argo,
        SlackStandin(token=SLACK_TOKEN, channels=frozenset({CHANNEL})) as slack,
    ):
        argo.default_script = ("Pending", "Running")  # runs until the test ends it
        env["SLACK_API_URL"] = slack.url
        first = Worker(cfg, tmp_path, "first", argo=argo.url, env=env)
        second = Worker(cfg, tmp_path, "second", argo=argo.url, env=env)
        producer = AIOKafkaProducer(bootstrap_servers=cfg.bootstrap, acks="all")
        await producer.start()
        try:
            first.start()
            first.wait_ready()
            await producer.send_and_wait(cfg.commands.name, encode(decision),
                                         key=decision.incident.encode())  # fmt: skip
            await until("the act message", lambda: len(slack.posted()) == 1, first)
            name = next(iter(argo.workflows))
            polled = len(argo.requests)
            await until("a poll", lambda: len(argo.requests) > polled + 1, first)
            first.kill()  # SIGKILL mid-follow: the workflow still Running
            argo.script(name, "Succeeded")
            second.start()
            second.wait_ready()
            await until("the end reply", lambda: len(slack.posted()) == 2, second)
            await asyncio.sleep(3.0)  # time enough for a post twice, if one were made
        finally:
            await producer.stop()
            first.stop()
            second.stop()
        act, end = slack.posted()
        submits = list(argo.submitted())
    assert "delete-pod" in act.body["text"] and "thread_ts" not in act.body
    assert end.body["thread_ts"] == act.ts and "Succeeded" in end.body["text"]
    assert len(submits) == 1, "the second worker submitted again"


async def test_a_survivor_takes_over_the_killed_workers_rows_mid_follow(
    bootstrap: str, tmp_path: Path
) -> None:
    """Two workers share the commands partitions; one is SIGKILLed while both workflows
    run. The survivor, rebalanced, restores the dead one's rows and follows them too."""
    cfg = config(bootstrap, "acting2", partitions=2)
    await ensure_topics(cfg)
    env = dict(ENV)
    decisions = [delete_decision(incident=f"stuck-{p}", target=f"vllm-{p}") for p in (0, 1)]
    argo, slack = stand_ins()
    with argo, slack:
        env["SLACK_API_URL"] = slack.url
        workers = [Worker(cfg, tmp_path, n, argo=argo.url, env=env) for n in ("a", "b")]
        producer = AIOKafkaProducer(bootstrap_servers=cfg.bootstrap, acks="all")
        await producer.start()
        try:
            for w in workers:
                w.start()
            for w in workers:
                w.wait_ready()
            for p, d in enumerate(decisions):  # one on each partition: each worker has one
                await producer.send_and_wait(cfg.commands.name, encode(d),
                                             key=d.incident.encode(), partition=p)  # fmt: skip
            await until("both act messages", lambda: len(slack.posted()) == 2, workers[1])
            workers[0].kill()
            for name in list(argo.workflows):
                argo.script(name, "Running", "Succeeded")
            await until("both ends", lambda: len(slack.posted()) == 4, workers[1])
            await asyncio.sleep(3.0)  # time enough for a post twice, if one were made
        finally:
            await producer.stop()
            for w in workers:
                w.stop()
        posted = slack.posted()
        submits = list(argo.submitted())
    acts = {p.body["text"].split("vllm-")[1][0]: p.ts for p in posted if "thread_ts" not in p.body}
    ends = [p for p in posted if "thread_ts" in p.body]
    assert len(posted) == 4 and len(acts) == 2, [p.body["text"][:80] for p in posted]
    assert sorted(e.body["thread_ts"] for e in ends) == sorted(acts.values())
    assert all("Succeeded" in e.body["text"] for e in ends)
    assert len(submits) == 2, "a workflow was submitted twice"
