"""Issue 18 #8: the inbox was bounded by rows and age but not bytes, so 20 webhook bodies of
3.9 MB made 82 MiB of state file, over the 64 MiB emptyDir deploy/base mounts at /tmp. Now it
is bounded in bytes too: the oldest bodies (older than a minute) make room, else 503 and the
sender retries. The real SQLite inbox; the real Service (aiohttp on 127.0.0.1:0)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import aiohttp
import orjson

from remediator.runtime.inbox import KEEP_BYTES, Inbox
from remediator.runtime.service import ServiceConfig
from tests.logcheck import LogRecorder
from tests.runtime.conftest import WEBHOOK_TOKEN, running, stuck_pod, without_watch

EMPTY_DIR = 64 * 1024 * 1024  # deploy/base/deployment.yaml: the emptyDir at /tmp


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_the_oldest_bodies_make_room_but_never_the_last_minutes(tmp_path: Path) -> None:
    now = Clock()
    inbox = Inbox(tmp_path / "s.db", now, keep_bytes=100_000, keep_recent_s=60)
    body = b"x" * 30_000
    first = inbox.write([("webhook", body)] * 3)
    now.t += 1
    assert inbox.write([("webhook", body)]) == [None]  # all of it from the last minute
    assert inbox.bytes == 90_000
    now.t += 60
    (newest,) = inbox.write([("webhook", body)])  # the oldest one makes room
    assert newest is not None
    assert [r.id for r in inbox.kept()] == [*first[1:], newest]
    assert inbox.bytes == 90_000 == sum(len(r.body) for r in inbox.kept())
    inbox.close()
    again = Inbox(tmp_path / "s.db", now, keep_bytes=100_000, keep_recent_s=60)
    assert again.bytes == 90_000  # counted again on start
    again.close()


def big_event(i: int, size: int) -> bytes:
    """A watch event of `size` bytes: a pod with a large annotation (a 3.9 MB body)."""
    pod = stuck_pod(f"vllm-big-{i}")
    pod["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"big-{i}"))
    pod["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    small = len(orjson.dumps({"type": "ADDED", "object": pod}))
    pod["metadata"]["annotations"] = {"example.com/blob": "b" * (size - small - 40)}
    return orjson.dumps({"type": "ADDED", "object": pod})


async def test_twenty_bodies_of_3_9_mb_stay_within_the_empty_dir(
    config: ServiceConfig, tmp_path: Path, logs_at_debug: LogRecorder
) -> None:
    cfg = replace(without_watch(config), state_db=str(tmp_path / "tmp" / "state.db"))
    assert cfg.inbox_keep_bytes == KEEP_BYTES  # the shipped default
    statuses: list[int] = []
    async with running(cfg) as service, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{service.port}/events"
        headers = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
        for i in range(20):
            body = big_event(i, 3_900_000)
            async with http.post(url, data=body, headers=headers) as resp:
                statuses.append(resp.status)
                if resp.status == 503:
                    assert resp.headers["Retry-After"] == "1"
                    assert "inbox full" in (await resp.json())["error"]
        await asyncio.sleep(0)
        on_disk = sum(p.stat().st_size for p in (tmp_path / "tmp").iterdir())
    assert statuses[:4] == [202] * 4 and set(statuses[4:]) == {503}, statuses
    assert on_disk < EMPTY_DIR // 2, on_disk  # db, WAL and all, with room to spare
    assert len(logs_at_debug.named("webhook not accepted: 503")) == 1
