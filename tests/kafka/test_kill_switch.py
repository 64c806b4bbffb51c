"""The kill switch on a real broker: a worker given serve's kill-switch file holds every
decision while it says on (guardrail kill_switch, nothing recorded), and lets the held
pod's deletion through at the next look once it says off. Real: the broker, faust, the
worker process, the file; the pod's stream is published by the real Publisher, its times
the API server's (stamps and ticks), so no wall-clock wait is needed for a budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from remediator.streams.ingest import Publisher
from remediator.streams.topics import ensure_topics
from tests.kafka.harness import Worker, config, recorded, until
from tests.runtime.test_cluster_time import POLICY
from tests.runtime.test_virtual_clock import T0, pod


async def test_the_kill_switch_holds_decisions_until_it_says_off(
    bootstrap: str, tmp_path: Path
) -> None:
    cfg = config(bootstrap, "killswitch", partitions=2)
    await ensure_topics(cfg)
    switch = tmp_path / "kill-switch"
    switch.write_text("on\n")
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)  # engine init 300 s, one check
    worker = Worker(cfg, tmp_path, "a", policy=policy,
                    extra=["--kill-switch-file", str(switch)])  # fmt: skip
    pub = Publisher(cfg)
    await pub.start()
    worker.start()
    try:
        worker.wait_ready()
        await pub.publish(orjson.dumps(pod("hung", started=T0)))
        await pub.tick(T0 + 301)  # its budget lapses: deleted, were the switch off

        def held() -> list[dict[str, object]]:
            return [x for x in worker.log_lines() if x.get("msg") == "suppressed"
                    and x.get("guardrail") == "kill_switch"]  # fmt: skip

        await until("the deletion held by the switch", held, worker)
        assert "says on" in str(held()[0]["why"]) and held()[0]["pod"] == "hung"
        assert recorded(tmp_path) == []
        assert b"remediator_kill_switch_engaged 1.0" in worker.get("/metrics")[1]
        switch.write_text("off\n")
        await asyncio.sleep(1.5)  # the guard reads it at most every second
        await pub.tick(T0 + 400)  # the next look (a check interval on) is due

        def deleted() -> list[str]:
            return [str(r["target"]) for r in recorded(tmp_path) if r["action"] == "delete-pod"]

        await until("the deletion, once off", deleted, worker)
        assert deleted() == ["hung"]
    finally:
        await pub.stop()
        worker.stop()
