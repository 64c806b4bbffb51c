"""GET /timelines on serve: the same `timeline` lines `remediator replay -o json` prints."""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

import aiohttp
import orjson

from remediator.output import JsonOutput
from remediator.replay import run_replay
from remediator.runtime.service import ServiceConfig
from remediator.session import Session
from tests.runtime.conftest import WEBHOOK_TOKEN, iso, running, stuck_pod, without_watch


def _replayed(lines: list[bytes], tmp: Any) -> list[dict[str, Any]]:
    path = tmp / "rec.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    out = io.StringIO()
    run_replay([str(path)], Session(), JsonOutput(out))
    docs = [orjson.loads(x) for x in out.getvalue().splitlines()]
    return [d for d in docs if d["kind"] == "timeline"]


async def test_timelines_are_what_replay_prints(config: ServiceConfig, tmp_path: Any) -> None:
    # Two pods; the second one is Ready. Huge budgets: nothing is decided meanwhile.
    stuck = stuck_pod("vllm-llama-70b-0", started_ago_s=30)
    ready = stuck_pod("vllm-llama-70b-1", started_ago_s=300)
    ready["metadata"]["uid"] = "uid-ready-1"
    stuck["metadata"]["uid"] = "uid-stuck-0"
    ready["status"]["conditions"][1].update(status="True", lastTransitionTime=iso(time.time() - 5))
    lines = [orjson.dumps({"type": "ADDED", "object": o}) for o in (stuck, ready)]
    headers = {"Authorization": f"Bearer {WEBHOOK_TOKEN}"}
    async with running(without_watch(config)) as service, aiohttp.ClientSession() as http:
        base = f"http://127.0.0.1:{service.port}"
        for line in lines:
            async with http.post(f"{base}/events", data=line, headers=headers) as r:
                assert r.status == 202
        while len(service.session.tracker) < 2:
            await asyncio.sleep(0.02)
        async with http.get(f"{base}/timelines") as r:
            assert r.status == 200 and r.content_type == "application/x-ndjson"
            every = [orjson.loads(x) for x in (await r.read()).splitlines()]
        async with http.get(f"{base}/timelines?state=engine_init") as r:
            in_init = [orjson.loads(x) for x in (await r.read()).splitlines()]
        async with http.get(f"{base}/timelines/llm/vllm-llama-70b-1") as r:
            one = [orjson.loads(x) for x in (await r.read()).splitlines()]
        async with http.get(f"{base}/timelines/llm/no-such-pod") as r:
            missing = (r.status, await r.json())
    assert every == _replayed(lines, tmp_path)
    assert [d["pod"] for d in every] == ["vllm-llama-70b-0", "vllm-llama-70b-1"]
    assert [d["state"] for d in every] == ["engine_init", "ready"]
    assert [d["pod"] for d in in_init] == ["vllm-llama-70b-0"]
    assert one == [every[1]] and 294.0 <= one[0]["phases"]["engine_init"] <= 296.0
    assert missing == (404, {"error": "no timeline for pod llm/no-such-pod"})
