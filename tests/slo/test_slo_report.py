"""`remediator slo-report` against the real Prometheus, scraping the real serve fed cold starts.

Serve gets pods, first tokens and vLLM log lines on /events (as a recording replayed to it);
Prometheus scrapes it every second; slo-report reads the quantiles, shares and worst pods back
through prometheus-api-client. The expected figures are worked out beside each assertion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from click.testing import CliRunner

from remediator.runtime.service import Service, ServiceConfig
from remediator.slo.cli import slo_report
from remediator.slo.target import parse_target, share_within
from tests.data import vllm_logs
from tests.promstack import Timings, start_prometheus

TOKEN = "slo-report-webhook-token"
NS = "llm"
BIG, SMALL = "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-14B"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(name: str, model: str, created: float, **t: float) -> dict[str, Any]:
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": iso(t["sched"])}]
    state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
    if "started" in t:
        state = {"running": {"startedAt": iso(t["started"])}}
    if "ready" in t:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": iso(t["ready"])})
    return {
        "type": "MODIFIED" if "started" in t else "ADDED",
        "object": {
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "uid": f"uid-{name}",
                "creationTimestamp": iso(created),
                "labels": {"app": "vllm", "model": model},
            },
            "spec": {
                "nodeName": "gpu-node-1",
                "containers": [{"name": "vllm", "args": ["--model", model]}],
            },
            "status": {
                "phase": "Running" if "started" in t else "Pending",
                "conditions": conds,
                "containerStatuses": [{"name": "vllm", "restartCount": 0, "state": state}],
            },
        },
    }


def fleet(now: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(first sight of every pod, the rest of each cold start).

    70B: 10 pods, engine init 200..290 s, first token 5 s, except one at 75 s.
    14B: 5 pods, engine init 60 s, first token 3 s. One more 70B pod stuck in engine init.
    """
    first, rest = [], []
    for i in range(10):
        c = now - 900 + i
        name = f"vllm-70b-{i}"
        first.append(pod(name, BIG, c, sched=c + 1))
        ready = c + 40 + 200 + 10 * i
        rest.append(pod(name, BIG, c, sched=c + 1, started=c + 40, ready=ready))
        ft = 75 if i == 9 else 5
        rest.append({"kind": "FirstToken", "namespace": NS, "pod": name, "time": iso(ready + ft)})
        if i < 3:  # three pods' logs read during engine init: weights 120 s, graphs 60 s
            lines = [(c + 160, "2025-11-v1-engine.log", "Model loading took")]
            lines.append((c + 220, "2025-06-v1-api-server.log", "Graph capturing finished"))
            for at, f, needle in lines:
                line = next(ln for ln in vllm_logs.lines(f) if needle in ln)
                first.append(vllm_logs.engine_log(NS, name, line, at))
    for i in range(5):
        c = now - 600 + i
        name = f"vllm-14b-{i}"
        first.append(pod(name, SMALL, c, sched=c + 1))
        rest.append(pod(name, SMALL, c, sched=c + 1, started=c + 20, ready=c + 80))
        rest.append({"kind": "FirstToken", "namespace": NS, "pod": name, "time": iso(c + 83)})
    stuck = now - 2000
    first.append(pod("vllm-70b-stuck", BIG, stuck, sched=stuck + 1, started=stuck + 30))
    return first, rest


@pytest.fixture
async def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Service]:
    monkeypatch.setenv("REMEDIATOR_WEBHOOK_TOKEN", TOKEN)
    cfg = ServiceConfig(
        listen="127.0.0.1:0", state_db=str(tmp_path / "state.db"), watch=False, dry_run=True
    )
    service = Service(cfg)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def _post(http: aiohttp.ClientSession, port: int, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        async with http.post(
            f"http://127.0.0.1:{port}/events",
            data=orjson.dumps(doc),
            headers={"Authorization": f"Bearer {TOKEN}"},
        ) as r:
            assert r.status == 202, await r.text()


async def _until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_slo_report_reads_back_what_serve_exported(serve: Service, tmp_path: Path) -> None:
    assert serve.port is not None
    prom = start_prometheus(tmp_path, {"remediator": f"127.0.0.1:{serve.port}"}, Timings())
    try:
        from tests.promstack import Stack

        stack = Stack(prom, prom, [prom])
        first, rest = fleet(float(int(time.time())))
        async with aiohttp.ClientSession() as http:
            await _post(http, serve.port, first)
            # The series exist at zero before any cold start ends (else increase() loses it).
            zero = 'count(remediator_cold_start_phase_seconds_count{phase="first_token"} == 0)'
            await _until(lambda: stack.query(zero), "zero series scraped")
            await asyncio.sleep(1.5)
            await _post(http, serve.port, rest)
        done = 'sum(remediator_cold_start_phase_seconds_count{phase="first_token"}) == 15'
        await _until(lambda: stack.query(done), "15 first tokens scraped")
        await _until(lambda: stack.query("count(remediator_pod_phase_elapsed_seconds)"), "gauge")
        # As of the last scrape: increase() then counts exactly (no extrapolation past it).
        last = stack.query("max(timestamp(remediator_cold_start_phase_seconds_count))")
        at = datetime.fromtimestamp(float(last[0]["value"][1]), tz=UTC).isoformat()
        png = tmp_path / "slo.png"
        args = ["--prometheus", prom.url, "--window", "1h", "--at", at, "-o", "json"]
        args += ["--png", str(png)]
        args += ["--target", "first_token<60s@99%", "--target", "engine_init<300s@95%"]
        args += ["--target", "weights<90s@50%"]
        result = await asyncio.to_thread(CliRunner().invoke, slo_report, args)
    finally:
        prom.stop()
    assert result.exit_code == 1, result.output  # first_token missed its 99 %
    report = orjson.loads(result.output)
    rows = {(r["model"], r["phase"]): r for r in report["phases"]}
    assert rows[(BIG, "first_token")]["pods"] == 10 and rows[(SMALL, "first_token")]["pods"] == 5
    # 9 of 10 at 5 s: the median interpolates inside (2, 5]; P99 lands in (60, 90] (the 75 s)
    assert 2 < rows[(BIG, "first_token")]["p50"] <= 5
    assert 60 < rows[(BIG, "first_token")]["p99"] <= 90
    # 14B engine init is 60 s for every pod: (45, 60]
    assert 45 < rows[(SMALL, "engine_init")]["p50"] <= 60
    assert rows[(BIG, "total")]["pods"] == 10
    steps = {(r["model"], r["step"]): r for r in report["engine_init_steps"]}
    assert steps[(BIG, "weights")]["pods"] == 3 and 90 < steps[(BIG, "weights")]["p50"] <= 120
    assert steps[(BIG, "cuda_graphs")]["pods"] == 3

    ft, init, weights = report["targets"]
    assert (ft["pods"], ft["share"], ft["met"], ft["exact"]) == (15, round(14 / 15, 4), False, True)
    by_model = {m["model"]: (m["share"], m["met"]) for m in ft["models"]}
    assert by_model == {BIG: (0.9, False), SMALL: (1.0, True)}
    assert (init["share"], init["met"]) == (1.0, True)
    assert (weights["pods"], weights["share"], weights["exact"]) == (3, 0.0, True)

    worst = report["worst_pods"][0]
    assert (worst["pod"], worst["phase"], worst["model"]) == ("vllm-70b-stuck", "engine_init", BIG)
    # In engine init since `now` - 1970 s, on the cluster's clock (runtime.clock.ClusterTime):
    # fed by webhooks alone, that clock is the newest stamp posted (a 14B pod's Ready at
    # `now` - 516 s) carried on by the monotonic clock, so at least 1970 - 516 s have passed.
    assert worst["seconds"] >= 1970 - 516
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_output_and_bad_usage(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(slo_report, ["--prometheus", "http://127.0.0.1:1", "--target", "ttft<1s"])
    assert bad.exit_code == 2 and "expected PHASE<DURATION@PERCENT" in bad.output
    down = runner.invoke(slo_report, ["--prometheus", "http://127.0.0.1:1"])
    assert down.exit_code == 2 and "Prometheus at http://127.0.0.1:1" in down.output


def test_targets_and_shares() -> None:
    t = parse_target("total < 10m @ 95%")
    assert (t.phase, t.seconds, t.objective) == ("total", 600.0, 0.95)
    with pytest.raises(ValueError, match="unknown phase"):
        parse_target("latency<1s@99%")
    with pytest.raises(ValueError, match="percent"):
        parse_target("total<1s@0%")
    inf = float("inf")
    buckets = [(30.0, 2.0), (60.0, 8.0), (90.0, 9.0), (inf, 10.0)]
    assert share_within(buckets, 60).fraction == 0.8
    half = share_within(buckets, 45)
    assert not half.exact and half.within == 5.0  # halfway from 2 to 8
    assert share_within(buckets, 1000).within == 9.0  # past the last bound: only what's known
    assert share_within([], 60).fraction is None
