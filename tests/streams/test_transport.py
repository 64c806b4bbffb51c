"""The worker's consumer waits at the broker as configured, not Faust's written-in 1.5 s
(streams/transport.py): built through Faust's own path, as the worker builds it, so a
Faust release that renames what it overrides fails here rather than quietly waiting 1.5 s
per hop again. No broker: the consumer is built, not started."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from remediator.policy_file import PolicyFile
from remediator.streams.app import build_app
from remediator.streams.config import StreamsConfig
from remediator.streams.executor import DryRunRecorder, Executors
from remediator.streams.transport import ShortWaitTransport


def worker_consumer_wait_ms(tmp_path: Path, **config: float) -> int:
    cfg = StreamsConfig(broker="kafka://127.0.0.1:1", table_dir=str(tmp_path), **config)  # type: ignore[arg-type]
    executors = Executors(DryRunRecorder(str(tmp_path / "dry-run.jsonl")))
    app = build_app(cfg, PolicyFile(), executors, CollectorRegistry())
    assert isinstance(app.transport, ShortWaitTransport)

    async def build() -> int:
        thread = app.consumer._thread  # type: ignore[attr-defined]
        consumer = thread._create_consumer(asyncio.get_running_loop())
        return int(consumer._fetch_max_wait_ms)

    return asyncio.run(build())


def test_the_worker_consumer_waits_50_ms_by_default(tmp_path: Path) -> None:
    assert worker_consumer_wait_ms(tmp_path) == 50


def test_the_wait_is_the_configured_one(tmp_path: Path) -> None:
    assert worker_consumer_wait_ms(tmp_path, fetch_wait_s=0.2) == 200


@pytest.mark.parametrize("wait", [0.0, -1.0, 31.0])
def test_a_wait_out_of_range_is_refused(wait: float) -> None:
    with pytest.raises(ValueError, match="fetch_wait_s"):
        StreamsConfig(fetch_wait_s=wait)
