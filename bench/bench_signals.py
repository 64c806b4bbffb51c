"""From a pod's engine init crossing its budget to the workflow submission, two paths in one
run, and the cost of following a pod's log in engine init (issue 13, "Performance").

  (a) timer:  serve's own timer (the watch saw the pod; the budget lapses; outbox; Argo)
  (b) alert:  deploy/'s rule in the real Prometheus, scraping serve's /metrics → the real
              Alertmanager with deploy/'s route → POST /events → serve decides → outbox → Argo
              at the fastest realistic settings: 1 s scrape and evaluation, group_wait 0s,
              `for: 0s` (fires at the first evaluation past 60 s) and `for: 2s` (three
              evaluations in a row: the SREs' rule at 1 s)
  (c) alert at common settings (--common, slow: ~3 min): 15 s scrape, 30 s evaluation,
              `for: 1m`, deploy/'s group_wait 10s
  (d) log following: N pods in engine init, each with a vLLM start-up log, followed through
              pods/log; bytes read and the follower threads' own CPU per pod.

Each path runs its own serve against the kube API and Argo stand-ins (tests/standins): same
process, same code. Latency is wall-clock from the crossing (the pod's startedAt, as the API
server has it, plus the budget) to the stand-in Argo receiving the submit. Goal: (a) p99 ≤ 1 s.

    .venv/bin/python bench/bench_signals.py [--pods 20] [--common] [--log-pods 16]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remediator.inputs.timefmt import parse_time  # noqa: E402
from remediator.runtime.embedded import RuntimeSettings  # noqa: E402
from remediator.runtime.service import Service, ServiceConfig  # noqa: E402
from tests.data import vllm_logs  # noqa: E402
from tests.promstack import (  # noqa: E402
    Timings,
    alertmanager_config,
    rule_groups,
    start_alertmanager,
    start_prometheus,
)
from tests.runtime.conftest import stuck_pod  # noqa: E402
from tests.standins.argo_server import ArgoStandin  # noqa: E402
from tests.standins.kube_api import KubeApiServer  # noqa: E402

NS = "llm"
TOKEN = "bench-webhook-token"
ARGO_TOKEN = "bench-argo-token"
RULE_S = 60.0  # deploy/'s VLLMEngineInitSlow: engine init > 60 s
GUARDS = """
guardrails:
  min_age: {factor: 0}
  cooldown: {seconds: 0}
  blast_radius: {max_pods: 1000, max_percent: 100, max_pods_cluster: 1000}
  rate_limit: {per_minute: 10000, burst: 10000}
"""
TIMER_POLICY = (
    """
stuck_pod:
  namespaces: [llm]
  budgets: {engine_init: %d}
  checks: 1
  adaptive: {enabled: false}
  expected_cold_start_s: 0
"""
    + GUARDS
)
ALERT_POLICY = TIMER_POLICY % 3600  # the timer never acts: only the alert can
LOG_POLICY = (
    """
stuck_pod: {namespaces: [llm], budgets: {engine_init: 3600}}
engine_logs: {follow: true, max_pods: %d, max_bytes: 1048576}
"""
    + GUARDS
)


def pod(name: str, started: float) -> dict[str, Any]:
    p = stuck_pod(name, started_ago_s=time.time() - started)
    p["metadata"]["ownerReferences"][0]["name"] = f"vllm-{name}"  # one workload per pod
    return p


def started_of(p: dict[str, Any]) -> float:
    return parse_time(p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])


def config(tmp: Path, kube: KubeApiServer, argo: ArgoStandin, policy: str) -> ServiceConfig:
    path = tmp / f"policy-{time.monotonic_ns()}.yaml"
    path.write_text(policy)
    return ServiceConfig(
        policy=str(path),
        listen="127.0.0.1:0",
        state_db=str(tmp / f"state-{time.monotonic_ns()}.db"),
        namespaces=(NS,),
        warmup_daemonset=None,
        kubeconfig=str(kube.write_kubeconfig(tmp / "kubeconfig")),
        argo_server=argo.url,
        argo_poll_s=0.2,
        runtime=RuntimeSettings(executor_poll_s=0.1),
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def latencies(argo: ArgoStandin, crossing: dict[str, float]) -> list[float]:
    out = []
    for name, wf in argo.workflows.items():
        params = {p["name"]: p["value"] for p in wf["spec"]["arguments"]["parameters"]}
        out.append(argo.submitted_at[name] - crossing[params["pod"]])
    return out


async def until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        await asyncio.sleep(0.02)


async def timer_path(tmp: Path, pods: int, spacing: float, budget: int) -> list[float]:
    with KubeApiServer() as kube, ArgoStandin(token=ARGO_TOKEN) as argo:
        service = Service(config(tmp, kube, argo, TIMER_POLICY % budget))
        await service.start()
        try:
            await until(lambda: service.runtime.ready()[0], 30, "watches synced")
            now = time.time()
            crossing = {}
            for k in range(pods):  # each crosses its budget 2 s + k × spacing from now
                p = kube.store.create(pod(f"t-{k}", now - budget + 2 + k * spacing))
                crossing[p["metadata"]["name"]] = started_of(p) + budget
            await until(lambda: len(argo.workflows) == pods, 60 + pods * spacing, "timer path")
        finally:
            await service.stop()
        return latencies(argo, crossing)


async def alert_path(tmp: Path, pods: int, spacing: float, t: Timings, lead: float) -> list[float]:
    tmp = Path(tempfile.mkdtemp(dir=tmp))
    with KubeApiServer() as kube, ArgoStandin(token=ARGO_TOKEN) as argo:
        service = Service(config(tmp, kube, argo, ALERT_POLICY))
        await service.start()
        token = tmp / "token"
        token.write_text(TOKEN)
        hook = f"http://127.0.0.1:{service.port}/events"
        am = start_alertmanager(tmp, alertmanager_config(hook, token, t))
        prom = start_prometheus(
            tmp, {"remediator": f"127.0.0.1:{service.port}"}, t, rule_groups(t), am.url
        )
        try:
            await asyncio.sleep(lead / 2)  # Prometheus has scraped serve and evaluated
            now = time.time()
            crossing = {}
            for k in range(pods):
                p = kube.store.create(pod(f"a-{k}", now - RULE_S + lead + k * spacing))
                crossing[p["metadata"]["name"]] = started_of(p) + RULE_S
            wait = lead + pods * spacing + 300
            await until(lambda: len(argo.workflows) == pods, wait, "alert path")
        finally:
            prom.stop()
            am.stop()
            await service.stop()
        return latencies(argo, crossing)


def vllm_startup_log() -> list[str]:
    """A 70B vLLM start-up as the container logs it: the real step lines of several releases,
    with what surrounds them (TP workers, shard and CUDA-graph progress bars, routes)."""
    lines: list[str] = []
    for name in vllm_logs.files():
        lines += vllm_logs.lines(name)
    shards = "Loading safetensors checkpoint shards: {:3d}% Completed | {}/30 [00:{:02d}<00:30]"
    lines[:0] = [shards.format(round(i * 100 / 30), i, i) for i in range(31)]
    graphs = (
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {:3d}%|#####| {}/67 [00:{:02d}]"
    )
    lines += [graphs.format(round(i * 100 / 67), i, i % 60) for i in range(68)]
    return lines * 2 + ["INFO:     Application startup complete."]  # two TP workers


async def log_cost(tmp: Path, pods: int) -> dict[str, float]:
    log = vllm_startup_log()
    with KubeApiServer() as kube, ArgoStandin(token=ARGO_TOKEN) as argo:
        service = Service(config(tmp, kube, argo, LOG_POLICY % pods))
        await service.start()
        follower = service.observers.follower
        assert follower is not None
        try:
            await until(lambda: service.runtime.ready()[0], 30, "watches synced")
            for k in range(pods):
                for line in log:
                    kube.logs.write(NS, f"l-{k}", "vllm", line)
            cpu0, wall0 = time.process_time(), time.monotonic()
            for k in range(pods):
                kube.store.create(pod(f"l-{k}", time.time() - 30))
            total = sum(len(line) + 1 + 31 for line in log) * pods  # + the kubelet's stamp
            await until(lambda: kube.logs.bytes_sent >= total, 120, "logs sent")
            await until(lambda: sum(follower.bytes_by_pod().values()) >= total, 60, "logs read")
            cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
            tracker = service.session.tracker
            steps = [tracker.current(NS, f"l-{k}") for k in range(pods)]
            kinds = sum(len(t.engine.seen) for t in steps if t is not None and t.engine)
        finally:
            await service.stop()  # ends the follows: each records its thread's CPU
    per_pod = list(follower.history)
    return {
        "pods": pods,
        "log_bytes": total / pods,
        "read_bytes": statistics.mean(b for _, b, _ in per_pod),
        "thread_cpu_ms": statistics.mean(c for _, _, c in per_pod) * 1000,
        "process_cpu_ms": cpu * 1000 / pods,
        "steps_per_pod": kinds / pods,
        "wall_s": wall,
    }


def show(name: str, xs: list[float], goal: float | None = None) -> None:
    p50, p99, worst = statistics.median(xs), pct(xs, 0.99), max(xs)
    verdict = (
        ""
        if goal is None
        else ("  goal met" if p99 <= goal else f"  MISSED (goal p99 ≤ {goal:g} s)")
    )
    figures = f"p50 {p50:6.3f} s  p99 {p99:6.3f} s  max {worst:6.3f} s"
    print(f"{name:<42} n={len(xs):>3}  {figures}{verdict}")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pods", type=int, default=20, help="pods per path")
    ap.add_argument("--spacing", type=float, default=0.37, help="seconds between crossings")
    ap.add_argument("--budget", type=int, default=20, help="the timer path's engine_init budget")
    ap.add_argument("--common", action="store_true", help="also 15 s/30 s, for: 1m (slow)")
    ap.add_argument("--log-pods", type=int, default=16)
    ap.add_argument("--only-logs", action="store_true", help="(d) only")
    args = ap.parse_args()
    os.environ["REMEDIATOR_WEBHOOK_TOKEN"] = TOKEN
    os.environ["ARGO_TOKEN"] = ARGO_TOKEN
    tmp = Path(tempfile.mkdtemp(prefix="bench-signals-"))
    print(f"crossing → workflow submitted, {args.pods} pods a path, {args.spacing:g} s apart")
    if args.only_logs:
        return await logs(tmp, args.log_pods)
    timer = await timer_path(tmp, args.pods, args.spacing, args.budget)
    show("(a) timer (serve's own)", timer, goal=1.0)
    fast0 = await alert_path(tmp, args.pods, args.spacing, Timings(alert_for="0s"), lead=4)
    show("(b) alert 1s/1s, for: 0s, group_wait 0s", fast0)
    fast2 = await alert_path(tmp, args.pods, args.spacing, Timings(alert_for="2s"), lead=4)
    show("(b) alert 1s/1s, for: 2s, group_wait 0s", fast2)
    med = statistics.median(timer)
    print(
        f"    the alert path adds {statistics.median(fast0) - med:+.2f} s (for: 0s) and "
        f"{statistics.median(fast2) - med:+.2f} s (for: 2s) at the median; p99 ratio "
        f"{pct(fast0, 0.99) / pct(timer, 0.99):.1f}x / {pct(fast2, 0.99) / pct(timer, 0.99):.1f}x"
    )
    if args.common:
        common = Timings(
            scrape="15s",
            evaluation="30s",
            alert_for="1m",
            group_wait="10s",
            group_interval="1m",
            repeat_interval="1h",
            resend_delay="1m",
        )
        slow = await alert_path(tmp, min(args.pods, 6), 1.0, common, lead=35)
        show("(c) alert 15s/30s, for: 1m, group_wait 10s", slow)
        print(f"    the alert path adds {statistics.median(slow) - med:+.1f} s at the median")
    await logs(tmp, args.log_pods)


async def logs(tmp: Path, pods: int) -> None:
    cost = await log_cost(tmp, pods)
    kib = cost["read_bytes"] / 1024
    print(f"(d) log following, {cost['pods']:.0f} pods at once, each log {kib:.1f} KiB read")
    print(
        f"    follower thread CPU {cost['thread_cpu_ms']:.1f} ms per pod "
        f"({cost['thread_cpu_ms'] * 1000 / kib:.0f} µs/KiB); whole process, the stand-in API "
        f"server included: {cost['process_cpu_ms']:.1f} ms per pod"
    )
    print(f"    {cost['steps_per_pod']:.0f} step kinds found per pod, {cost['wall_s']:.1f} s wall")


if __name__ == "__main__":
    asyncio.run(main())
