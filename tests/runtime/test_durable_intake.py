"""Issue 10 #1 and #4 in process: a 2xx is stored, a store that refuses writes is a 503 that
/readyz and /healthz report (and recover from), and a runtime task that raises is logged and
supervised. The real Service (aiohttp on 127.0.0.1:0, SQLite) with the stand-ins behind it.

The failing store is the real SQLite error an operator meets when another process holds the
state file's write lock ("database is locked"); a full disk is tested with `remediator serve`
on a tiny filesystem (test_intake_crash.py)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import aiohttp
import orjson

from remediator.runtime.clock import VirtualClock, settle
from remediator.runtime.leader import Always
from remediator.runtime.service import Service, ServiceConfig
from tests.logcheck import LogRecorder
from tests.runtime.conftest import WEBHOOK_TOKEN, running, stuck_pod, wait_until, without_watch

AUTH = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}


def watch_event(name: str) -> bytes:
    """A stuck vLLM pod as the API server would show it, past its budget on arrival."""
    pod = stuck_pod(name, started_ago_s=30)
    pod["metadata"]["uid"] = str(uuid.uuid5(uuid.NAMESPACE_DNS, name))
    pod["metadata"]["creationTimestamp"] = pod["status"]["conditions"][0]["lastTransitionTime"]
    owner = pod["metadata"]["ownerReferences"][0]  # its own workload: no blast radius between
    owner["name"], owner["uid"] = name, str(uuid.uuid5(uuid.NAMESPACE_URL, name))
    return orjson.dumps({"type": "ADDED", "object": pod})


async def post(port: int, body: bytes) -> tuple[int, dict[str, object]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/events", data=body, headers=AUTH) as resp,
    ):
        return resp.status, await resp.json()


async def probe(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as r:
        return r.status, str((await r.json())["detail"])


@contextmanager
def write_locked(state_db: str) -> Iterator[None]:
    """Another process holds the state file's write lock: every write of ours fails."""
    db = sqlite3.connect(state_db, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def quick(config: ServiceConfig) -> ServiceConfig:
    return replace(without_watch(config), state_busy_timeout_s=0.05)


async def test_a_202_is_in_the_state_file_and_fed(config: ServiceConfig) -> None:
    cfg = quick(config)
    async with running(cfg) as service:
        assert service.port is not None
        status, doc = await post(service.port, watch_event("vllm-a"))
        assert (status, doc["accepted"]) == (202, 1)
        with sqlite3.connect(cfg.state_db) as db:  # stored before the answer
            (body,) = db.execute("SELECT body FROM inbox").fetchone()
        assert orjson.loads(body)["object"]["metadata"]["name"] == "vllm-a"
        await wait_until(
            lambda: any(t.name == "vllm-a" for t in service.session.tracker), what="fed"
        )


async def test_a_stored_input_never_fed_is_fed_on_start_and_decided_once(
    config: ServiceConfig,
) -> None:
    """What a crash between the 202 and the core leaves: a row never fed. The next process
    feeds it first (the pod is tracked and decided on); the one after feeds it again (what
    the session knew is memory only) without deciding twice."""
    cfg = quick(config)
    async with running(cfg):
        pass  # creates the state file and its tables
    with sqlite3.connect(cfg.state_db) as db:
        db.execute(
            "INSERT INTO inbox (kind, body, created_at) VALUES ('webhook', ?, 0)",
            (watch_event("vllm-b"),),
        )
    async with running(cfg) as service:
        rows = await wait_until(lambda: service.outbox.rows(), what="decision from the row")
    assert [(r.decision.action, r.decision.target) for r in rows] == [("delete-pod", "vllm-b")]
    clock = VirtualClock()  # the budget lapses again when the test says, however slow the box
    async with running(cfg, clock=clock) as again:
        await wait_until(
            lambda: any(t.name == "vllm-b" for t in again.session.tracker), what="fed again"
        )
        await clock.advance(5.0)  # past the budget and the check interval again
        assert len(again.outbox.rows()) == 1  # not decided twice


async def test_a_store_that_refuses_writes_is_a_503_reported_and_recovered(
    config: ServiceConfig, logs_at_debug: LogRecorder
) -> None:
    cfg = quick(config)
    async with running(cfg) as service:
        port = service.port
        assert port is not None
        assert (await probe(port, "/readyz"))[0] == 200
        with write_locked(cfg.state_db):
            answers = [await post(port, watch_event(f"vllm-{i}")) for i in range(5)]
            assert {status for status, _ in answers} == {503}
            assert "database is locked" in str(answers[0][1]["error"])
            ready, why = await probe(port, "/readyz")
            assert ready == 503 and "cannot store inputs" in why
            health, why = await probe(port, "/healthz")
            assert health == 503 and "database is locked" in why
        # logged once, not once per request
        assert len(logs_at_debug.named("state file write failed")) == 1
        assert len(logs_at_debug.named("webhook not accepted: 503")) == 1
        # the lock is gone: the writer notices without any traffic
        await wait_until(
            lambda: service.runtime.ready()[0] and service.runtime.healthy()[0], what="recovery"
        )
        assert logs_at_debug.named("state file writable again")
        status, _ = await post(port, watch_event("vllm-after"))
        assert status == 202
    tracked = {t.name for t in service.session.tracker}
    assert "vllm-after" in tracked and not tracked & {f"vllm-{i}" for i in range(5)}


class Flaky:
    """A Leadership whose `run` raises its first `fails` times (or always), then leads."""

    def __init__(self, fails: int | None) -> None:
        self.inner = Always("flaky")
        self.identity = self.inner.identity
        self.fails = fails
        self.runs = 0

    def is_leader(self) -> bool:
        return True

    def subscribe(self, on_change: object) -> None:
        pass

    async def run(self, stop: asyncio.Event) -> None:
        self.runs += 1
        if self.fails is None or self.runs <= self.fails:
            raise RuntimeError(f"lease API exploded (run {self.runs})")
        await stop.wait()

    async def release(self) -> None:
        pass


async def test_a_task_that_raises_is_logged_and_restarted(
    config: ServiceConfig, tmp_path: Path, logs_at_debug: LogRecorder
) -> None:
    clock = VirtualClock()
    leader = Flaky(fails=2)
    service = Service(quick(config), leader, clock)  # type: ignore[arg-type]
    await service.start()
    try:
        await settle()
        failed = logs_at_debug.named("task failed, restarting")
        assert [(f["task"], f["restart_in_s"]) for f in failed] == [("leader", 1.0)]
        assert "lease API exploded (run 1)" in failed[0]["exc"]  # with its traceback
        ok, why = service.runtime.healthy()
        assert not ok and "task leader failed" in why
        await clock.advance(1.0)  # restarted, fails again: next pause 2 s
        assert leader.runs == 2
        await clock.advance(2.0)
        assert leader.runs == 3  # runs now
        assert service.runtime.healthy() == (True, "ok")
        restarts = service.runtime.metrics.task_restarts.labels("leader")._value.get()
        assert restarts == 2
    finally:
        await service.stop()


async def test_a_task_that_keeps_failing_stops_the_runtime(
    config: ServiceConfig, logs_at_debug: LogRecorder
) -> None:
    clock = VirtualClock()
    service = Service(quick(config), Flaky(fails=None), clock)  # type: ignore[arg-type]
    await service.start()
    try:
        for _ in range(6):
            await clock.advance(30.0)
        await asyncio.wait_for(service.wait(), 10)  # the runtime ended by itself
        ok, why = service.runtime.healthy()
        assert not ok and why.startswith("task leader failed 5 times")
        assert service.runtime.failure == why
        assert logs_at_debug.named("task keeps failing: stopping")
    finally:
        await service.stop()
