"""serve on the real control plane at fleet size (issue 7, "Performance").

    .venv/bin/python bench/bench_cluster.py [--nodes 200] [--pods 2000] [--hung 50]

Starts its own cluster (tests/cluster) with --nodes kwok GPU nodes (8 GPUs each), runs
`remediator serve` as its ServiceAccount, then, in one run:
  1. churn: Deployments of TP=2 vLLM pods (kwok stages: 1 s pull, 1 s start, 2 s engine init)
     scaled up and rolled until --pods pods have been created; serve's CPU seconds and RSS
     while it tracks them; the API server's pod and event writes (what the watch carries)
     against serve's inputs, and serve's CPU per input, giving the churn it could absorb;
  2. hung pods: --hung pods that never leave engine init; for each, from its engine-init budget
     lapsing (its container's startedAt + budget + checks) to the workflow submission arriving
     at the Argo stand-in (the delete call), p50/p99.
Prints the figures and their ratios to the goals (p99 <= 1 s; capacity >= 10x the churn).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import Cluster  # noqa: E402

from tests.live.harness import (  # noqa: E402
    NS,
    LiveCluster,
    Serve,
    example_deployment,
    install_deploy,
    wait_for,
)
from tests.standins.argo_server import ArgoStandin  # noqa: E402

BUDGET_S, CHECKS, INTERVAL_S = 6, 1, 1
POLICY = f"""
stuck_pod:
  selector: app=vllm-inference
  namespaces: [{NS}]
  budgets: {{scheduling: 600, image_pull: 600, container_start: 600, engine_init: {BUDGET_S}}}
  checks: {CHECKS}
  check_interval_s: {INTERVAL_S}
  expected_cold_start_s: 0
  adaptive: {{enabled: false}}
image_update: {{enabled: false}}
guardrails:
  cooldown: {{seconds: 1}}
  blast_radius: {{max_pods: 100000, max_percent: 100, window_s: 60, max_pods_cluster: 100000}}
  rate_limit: {{per_minute: 100000, burst: 100000}}
"""


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and RSS in MiB of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    rss_kib = next(
        int(line.split()[1])
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if line.startswith("VmRSS:")
    )
    import os

    return ticks / os.sysconf("SC_CLK_TCK"), rss_kib / 1024


def apiserver_writes(live: LiveCluster) -> float:
    """Pod and Event writes the API server has served (each reaches a watch as one event)."""
    import urllib.request

    req = urllib.request.Request(live.raw.server + "/metrics")
    with urllib.request.urlopen(req, context=live.raw._admin_tls(), timeout=30) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = line[line.index("{") + 1 : line.index("}")]
        ours = 'resource="pods"' in labels or 'resource="events"' in labels
        write = any(f'verb="{v}"' in labels for v in ("POST", "PATCH", "PUT", "DELETE", "APPLY"))
        if ours and write and 'code="2' in labels:
            total += float(line.rsplit(" ", 1)[1])
    return total


def ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def churn(
    live: LiveCluster, serve: Serve, pods: int, deployments: int, nodes: int
) -> dict[str, float]:
    """Deployments filled to 90% of the GPUs, then rolled (a new template annotation replaces
    every pod, one at a time as maxUnavailable 1 says) until `pods` pods have been created."""
    concurrent = min(pods, int(nodes * 8 // 2 * 0.9))  # TP=2: two GPUs a pod
    per = max(1, concurrent // deployments)
    rolls = max(0, math.ceil(pods / (per * deployments)) - 1)
    pid = serve.proc.pid if serve.proc else 0
    cpu0, _ = proc_cpu_rss(pid)
    writes0 = apiserver_writes(live)
    inputs0 = serve.sample("remediator_inputs_total")
    t0 = time.monotonic()
    rss_peak = 0.0
    shape = {"pull": "1s", "start": "1s", "engine": "2s"}
    for i in range(deployments):
        live.apply([example_deployment(f"churn-{i}", per, shape=shape)])

    def settled() -> bool:
        nonlocal rss_peak
        rss_peak = max(rss_peak, proc_cpu_rss(pid)[1])
        deps = live.api("GET", f"/apis/apps/v1/namespaces/{NS}/deployments")["items"]
        return all(
            d["status"].get("updatedReplicas") == d["spec"]["replicas"]
            and d["status"].get("readyReplicas") == d["spec"]["replicas"]
            and d["status"].get("replicas") == d["spec"]["replicas"]
            and d["status"].get("observedGeneration") == d["metadata"]["generation"]
            for d in deps
            if d["metadata"]["name"].startswith("churn-")
        )

    wait_for(settled, 1800, "the scale-up to settle")
    for roll in range(rolls):
        patch = {"spec": {"template": {"metadata": {"annotations": {"churn": str(roll)}}}}}
        for i in range(deployments):
            path = f"/apis/apps/v1/namespaces/{NS}/deployments/churn-{i}"
            live.api("PATCH", path, patch, ctype="application/strategic-merge-patch+json")
        wait_for(settled, 1800, f"roll {roll + 1} to settle")
    time.sleep(3)  # let serve drain what the watch still carries
    elapsed = time.monotonic() - t0
    cpu1, rss = proc_cpu_rss(pid)
    writes = apiserver_writes(live) - writes0
    inputs = serve.sample("remediator_inputs_total") - inputs0
    cpu = cpu1 - cpu0
    for i in range(deployments):
        live.delete(f"/apis/apps/v1/namespaces/{NS}/deployments/churn-{i}")
    return {
        "pods_created": per * deployments * (rolls + 1),
        "concurrent": per * deployments,
        "elapsed_s": elapsed,
        "serve_cpu_s": cpu,
        "serve_cpu_share": cpu / elapsed,
        "serve_rss_mib": rss,
        "serve_rss_peak_mib": max(rss_peak, rss),
        "api_writes": writes,
        "api_writes_per_s": writes / elapsed,
        "serve_inputs": inputs,
        "serve_inputs_per_s": inputs / elapsed,
        "serve_capacity_per_s": inputs / cpu if cpu else float("inf"),
    }


def hung(live: LiveCluster, argo: ArgoStandin, count: int) -> tuple[list[float], dict[str, int]]:
    """Lateness of each hung pod's delete submission after the core's due time (its container's
    startedAt + budget + (checks - 1) x interval), and what else was submitted."""
    # One Deployment each: the guardrails act on one pod of a workload at a time, by design.
    shape = {"pull": "1s", "start": "1s", "hang": "engine"}
    live.apply(example_deployment(f"hung-{i}", 1, shape=shape) for i in range(count))

    def deletes() -> list[dict[str, Any]]:
        return [
            w
            for w in list(argo.workflows.values())
            if w["spec"]["workflowTemplateRef"]["name"] == "delete-stuck-inference-pod"
            and _param(w, "pod").startswith("hung-")
        ]

    wait_for(lambda: len(deletes()) >= count, 600, f"{count} deletes of hung pods")
    others: dict[str, int] = {}
    for w in list(argo.workflows.values()):
        if w not in deletes():
            key = f"{w['spec']['workflowTemplateRef']['name']} {_param(w, 'pod')[:12]}"
            others[key] = others.get(key, 0) + 1
    late = []
    for wf in deletes():
        pod = live.get(f"/api/v1/namespaces/{NS}/pods/{_param(wf, 'pod')}")
        assert pod is not None, _param(wf, "pod")
        started = pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        due = ts(started) + BUDGET_S + (CHECKS - 1) * INTERVAL_S
        late.append(argo_arrivals[wf["metadata"]["name"]] - due)
    return late, others


def _param(wf: dict[str, Any], name: str) -> str:
    return next(
        (str(p["value"]) for p in wf["spec"]["arguments"]["parameters"] if p["name"] == name), ""
    )


argo_arrivals: dict[str, float] = {}


class TimedArgo(ArgoStandin):
    """The stand-in Argo, noting the wall time each workflow's submission arrived."""

    def _submit(self, namespace: str, body: Any) -> dict[str, Any]:
        wf = super()._submit(namespace, body)
        argo_arrivals[wf["metadata"]["name"]] = time.time()
        return wf


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--deployments", type=int, default=20)
    ap.add_argument("--hung", type=int, default=50)
    args = ap.parse_args()
    # A timeout's SIGTERM unwinds like Ctrl-C, so the cluster and serve are stopped by PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        raw = Cluster(Path(tmp) / "cluster")
        t0 = time.monotonic()
        raw.up(nodes=args.nodes, timeout=600)
        print(f"cluster: {args.nodes} nodes Ready in {time.monotonic() - t0:.1f} s")
        live = LiveCluster(raw)
        try:
            install_deploy(live)
            with TimedArgo(token="bench") as argo:
                serve = Serve(live, Path(tmp) / "serve", POLICY, argo.url, "bench").start()
                try:
                    c = churn(live, serve, args.pods, args.deployments, args.nodes)
                    late, others = hung(live, argo, args.hung)
                finally:
                    serve.stop()
        finally:
            raw.down()
    print(
        f"churn: {c['pods_created']:.0f} pods created ({c['concurrent']:.0f} at a time) "
        f"in {c['elapsed_s']:.1f} s"
    )
    print(f"  serve CPU {c['serve_cpu_s']:.1f} s ({100 * c['serve_cpu_share']:.1f}% of one core), "
          f"RSS {c['serve_rss_mib']:.0f} MiB (peak {c['serve_rss_peak_mib']:.0f} MiB)")  # fmt: skip
    print(f"  API server pod+event writes {c['api_writes']:.0f} ({c['api_writes_per_s']:.1f}/s); "
          f"serve inputs {c['serve_inputs']:.0f} ({c['serve_inputs_per_s']:.1f}/s)")  # fmt: skip
    headroom = c["serve_capacity_per_s"] / c["serve_inputs_per_s"]
    print(f"  serve capacity {c['serve_capacity_per_s']:.0f} inputs per CPU second -> "
          f"{headroom:.1f}x the churn (goal >= 10x)")  # fmt: skip
    p50, p99 = percentile(late, 0.5), percentile(late, 0.99)
    print(f"  other workflows submitted: {others or 'none'}")
    print(f"hung: {len(late)} pods; budget lapse -> delete call p50 {p50:.3f} s, p99 {p99:.3f} s "
          f"(goal p99 <= 1 s: {p99 / 1.0:.2f} of it); startedAt has 1 s resolution")  # fmt: skip


if __name__ == "__main__":
    main()
