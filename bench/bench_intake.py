"""Webhook intake: alerts/s and latency at 1, 10, 50 and 200 connections, durable beside
in-memory, in one run (issue 10, "Bench").

The server is serve's own Service (HTTP, runtime, session, SQLite), started as `serve` starts
it, in a child process of its own, webhooks only, dry run, logs at INFO to /dev/null:

  durable   the default: a 202 means the alert is in the state file (the inbox, group commit,
            synchronous=FULL)
  memory    `ServiceConfig(durable_intake=False)`, a bench-only setting: queued in memory
            before the 202, as before issue 10

The load is a second child: aiohttp, N keep-alive connections, each posting one firing
Alertmanager webhook (v4, one alert) after another for `--seconds`. It reports requests/s and
p50/p99/max latency; the server's CPU seconds (from /proc) give requests per CPU-second, the
"per core" figure. After the durable runs the inbox is counted: every 202 must be a row.
Goal: durable, 50 connections: >= 2,000 requests per CPU-second and p99 <= 20 ms.

    .venv/bin/python bench/bench_intake.py [--seconds 5] [--connections 1,10,50,200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOKEN = "bench-intake-token"
GOAL_PER_CPU_S, GOAL_P99_MS, GOAL_AT = 2000.0, 20.0, 50


def alert(i: int) -> bytes:
    doc = {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="VLLMEngineInitSlow", pod="vllm-{i}"}}',
        "status": "firing",
        "receiver": "remediator",
        "groupLabels": {"alertname": "VLLMEngineInitSlow"},
        "commonLabels": {"alertname": "VLLMEngineInitSlow", "namespace": "llm"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "truncatedAlerts": 0,
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "VLLMEngineInitSlow",
                    "namespace": "llm",
                    "pod": f"vllm-{i % 500}",
                    "severity": "warning",
                },
                "annotations": {"summary": "engine init over 60 s"},
                "startsAt": "2025-03-01T12:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": f"{i:016x}",
            }
        ],
    }
    return json.dumps(doc).encode()


# --- the server child ---------------------------------------------------------------------
async def serve_child(durable: bool, state_db: str) -> None:
    from remediator.runtime.logs import setup_logging
    from remediator.runtime.service import Service, ServiceConfig

    setup_logging("INFO")
    cfg = ServiceConfig(
        listen="127.0.0.1:0",
        state_db=state_db,
        watch=False,
        dry_run=True,
        warmup_daemonset=None,
        durable_intake=durable,
        inbox_keep_rows=10_000_000,  # keep every row: the bench counts them
    )
    service = Service(cfg)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await service.start()
    print(json.dumps({"port": service.port}), flush=True)
    await stop.wait()
    await service.stop()


# --- the load child -------------------------------------------------------------------------
async def load_child(port: int, connections: int, seconds: float) -> None:
    import aiohttp

    url = f"http://127.0.0.1:{port}/events"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    bodies = [alert(i) for i in range(1000)]
    latencies: list[float] = []
    codes: dict[int, int] = {}
    all_202 = 0  # the warm-up's too: each must be an inbox row
    conn = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=conn) as http:

        async def one(k: int, until: float, record: bool) -> None:
            nonlocal all_202
            i = k
            while time.perf_counter() < until:
                t0 = time.perf_counter()
                async with http.post(url, data=bodies[i % 1000], headers=headers) as resp:
                    await resp.read()
                all_202 += resp.status == 202
                if record:
                    latencies.append(time.perf_counter() - t0)
                    codes[resp.status] = codes.get(resp.status, 0) + 1
                i += connections

        warm = time.perf_counter() + min(1.0, seconds / 5)
        await asyncio.gather(*(one(k, warm, False) for k in range(connections)))
        started = time.perf_counter()
        print(json.dumps({"go": True}), flush=True)
        await asyncio.gather(*(one(k, started + seconds, True) for k in range(connections)))
        took = time.perf_counter() - started
    latencies.sort()
    n = len(latencies)
    print(
        json.dumps(
            {
                "n": n,
                "rps": n / took,
                "p50_ms": 1000 * latencies[n // 2],
                "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))],
                "max_ms": 1000 * latencies[-1],
                "codes": codes,
                "all_202": all_202,
                "took": took,
            }
        ),
        flush=True,
    )


# --- the parent -----------------------------------------------------------------------------
def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "REMEDIATOR_WEBHOOK_TOKEN": TOKEN}
    return subprocess.Popen(
        [sys.executable, __file__, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def measure(mode: str, connections: int, seconds: float, tmp: Path) -> dict[str, Any]:
    state_db = str(tmp / f"{mode}-{connections}.db")
    server = child("--serve", mode, state_db)
    assert server.stdout is not None
    port = json.loads(server.stdout.readline())["port"]
    try:
        load = child("--load", str(port), str(connections), str(seconds))
        assert load.stdout is not None
        json.loads(load.stdout.readline())  # warmed up: measure from here
        cpu0 = cpu_s(server.pid)
        result: dict[str, Any] = json.loads(load.stdout.readline())
        cpu = cpu_s(server.pid) - cpu0
        load.wait(60)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    result.update(mode=mode, connections=connections, cpu_s=cpu, per_cpu_s=result["n"] / cpu)
    if mode == "durable":
        with sqlite3.connect(state_db) as db:
            rows = db.execute("SELECT COUNT(*) FROM inbox").fetchone()[0]
        result["stored"] = rows
    return result


def report(results: list[dict[str, Any]]) -> None:
    print(
        f"{'mode':8} {'conns':>5} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}"
        f" {'cpu s':>6} {'req/cpu-s':>9}  codes"
    )
    for r in results:
        print(
            f"{r['mode']:8} {r['connections']:>5} {r['rps']:>8.0f} {r['p50_ms']:>7.2f}"
            f" {r['p99_ms']:>7.2f} {r['max_ms']:>7.1f} {r['cpu_s']:>6.2f} {r['per_cpu_s']:>9.0f}"
            f"  {r['codes']}"
        )
    for r in results:
        if r["mode"] == "durable":
            ok = "every 202 stored" if r["stored"] == r["all_202"] else "202s NOT ALL STORED"
            print(
                f"durable {r['connections']:>3} conns: {r['all_202']} answered 202 (warm-up"
                f" included), {r['stored']} inbox rows: {ok}"
            )
    by = {(r["mode"], r["connections"]): r for r in results}
    d, m = by.get(("durable", GOAL_AT)), by.get(("memory", GOAL_AT))
    if d and m:
        print(
            f"at {GOAL_AT} connections durable/memory: req/s {d['rps'] / m['rps']:.2f}x,"
            f" p99 {d['p99_ms'] / m['p99_ms']:.2f}x"
        )
    if d:
        met = d["per_cpu_s"] >= GOAL_PER_CPU_S and d["p99_ms"] <= GOAL_P99_MS
        print(
            f"goal (durable, {GOAL_AT} conns: >= {GOAL_PER_CPU_S:.0f} req per CPU-second,"
            f" p99 <= {GOAL_P99_MS:.0f} ms): {d['per_cpu_s']:.0f} req/cpu-s,"
            f" p99 {d['p99_ms']:.1f} ms -> {'met' if met else 'MISSED'}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per level")
    ap.add_argument("--connections", default="1,10,50,200")
    ap.add_argument("--serve", nargs=2, metavar=("MODE", "STATE_DB"), help=argparse.SUPPRESS)
    ap.add_argument("--load", nargs=3, metavar=("PORT", "CONNS", "S"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve_child(args.serve[0] == "durable", args.serve[1]))
        return
    if args.load:
        port, conns, seconds = args.load
        asyncio.run(load_child(int(port), int(conns), float(seconds)))
        return
    levels = [int(c) for c in args.connections.split(",")]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-intake-") as tmp:
        for conns in levels:
            for mode in ("memory", "durable"):  # side by side at each level
                results.append(measure(mode, conns, args.seconds, Path(tmp)))
                r = results[-1]
                print(
                    f"  {mode:8} {conns:>3} conns: {r['rps']:.0f} req/s, p99 {r['p99_ms']:.1f} ms",
                    file=sys.stderr,
                )
    print(f"CPU cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f}")
    report(results)


if __name__ == "__main__":
    main()
