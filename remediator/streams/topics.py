"""Create the topics explicitly, with their partition counts: a topic the broker
auto-creates gets its default count, and Faust's agents then crash with
PartitionsMismatch. An existing topic with another count is refused, never used."""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from remediator.streams.config import StreamsConfig


class TopicMismatch(RuntimeError):
    pass


async def ensure_topics(cfg: StreamsConfig) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=cfg.bootstrap, client_id=f"{cfg.group}-admin")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        compact = {"cleanup.policy": "compact"}  # a table keeps each key's last value
        wanted = [
            NewTopic(t.name, t.partitions, cfg.replication)
            for t in cfg.topics
            if t.name not in existing
        ] + [
            NewTopic(t.name, t.partitions, cfg.replication, topic_configs=compact)
            for t in cfg.changelogs
            if t.name not in existing
        ]
        if wanted:
            # Another worker may have made them first: the count is checked below.
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(wanted)
        everything = cfg.topics + cfg.changelogs
        counts: dict[str, int] = {}
        for _ in range(50):  # a topic just created may be described empty for a moment
            described = await admin.describe_topics([t.name for t in everything])
            counts = {d["topic"]: len(d["partitions"]) for d in described}
            if all(counts.get(t.name) for t in everything):
                break
            await asyncio.sleep(0.1)
        for t in everything:
            if counts.get(t.name) != t.partitions:
                raise TopicMismatch(
                    f"topic {t.name} has {counts.get(t.name)} partitions, configured"
                    f" {t.partitions}: change the configuration, or recreate the topic"
                )
    finally:
        await admin.close()
