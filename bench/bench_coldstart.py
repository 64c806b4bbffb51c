"""`kubectl coldstart`: time to the first screen on 200 pods, on the real control plane (issue 21).

    .venv/bin/python bench/bench_coldstart.py [--pods 200] [--deployments 4] [--runs 5]

Starts its own cluster (tests/cluster, built once) with enough kwok 8-GPU nodes, creates
--deployments copies of the example vLLM Deployment (1 GPU each; kwok plays 1 s pull, 1 s start,
2 s engine init) holding --pods pods, waits until every pod is Ready, then runs the installed
`kubectl-coldstart` console script as a user would (a new process each time, cluster-admin
kubeconfig, `-l app=vllm-inference`), --runs times, text and JSON:

  - wall time from the spawn to the whole first screen written (the process's exit: a
    one-shot command prints its screen at once), min / median / max;
  - one in-process run split into its parts: imports, kubeconfig, the three lists (pods and
    both Event APIs, at once), feeding the core, rendering.

Goal (issue 21): the first screen on 200 pods under 2 s. A benchmark: it prints figures and
says whether the goal was met; it never fails. It stops what it started, by PID.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import Cluster  # noqa: E402

from tests.live.harness import NS, LiveCluster, example_deployment, install_deploy  # noqa: E402
from tests.live.test_incidents import ready  # noqa: E402

GOAL_S = 2.0
SHAPE = {"pull": "1s", "start": "1s", "engine": "2s"}
PLUGIN = str(Path(sys.executable).parent / "kubectl-coldstart")


def _ready(live: LiveCluster) -> int:
    return sum(map(ready, live.pods(NS, "app=vllm-inference")))


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _spawned(kubeconfig: Path, *args: str) -> tuple[float, float, int, str]:
    """(wall s, the process's own CPU s, lines, stdout) of one run."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    argv = [PLUGIN, "--kubeconfig", str(kubeconfig), "-n", NS, "-l", "app=vllm-inference", *args]
    cpu = _cpu()
    start = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"kubectl-coldstart exited {out.returncode}: {out.stderr}")
    return took, _cpu() - cpu, len(out.stdout.splitlines()), out.stdout


def _parts(kubeconfig: Path) -> dict[str, float]:
    """One run in this process, split: what the first screen waits for."""
    code = f"""
import time, sys, json
t0 = time.perf_counter()
from remediator.coldstart.kube import Kube, load
from remediator.coldstart.render import text
from remediator.coldstart.snapshot import take
from remediator.coldstart.target import Target
from remediator.timeline.tracker import Tracker
t1 = time.perf_counter()
api, _ = load({str(kubeconfig)!r}, None)
kube = Kube(api)
t2 = time.perf_counter()
target = Target(selector="app=vllm-inference")
snap = take(kube, {NS!r}, target, Tracker(), {{"label_selector": "app=vllm-inference"}})
t3 = time.perf_counter()
lines = list(text(snap.timelines(), snap.now(), "x"))
t4 = time.perf_counter()
print(json.dumps({{"imports": t1 - t0, "kubeconfig": t2 - t1, "lists + feed": t3 - t2,
                  "render": t4 - t3, "pods": len(snap.timelines())}}))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    import json

    parts: dict[str, float] = json.loads(out.stdout)
    return parts


def _split_feed(kubeconfig: Path) -> tuple[float, float]:
    """The lists alone (as `take` makes them) against lists + feed: the core's share."""
    code = f"""
import time, json
from concurrent.futures import ThreadPoolExecutor
from remediator.coldstart.kube import Kube, load
from remediator.coldstart.snapshot import _list_all, event_selector
from remediator.coldstart.target import Target
api, _ = load({str(kubeconfig)!r}, None)
kube = Kube(api)
t = Target(selector="app=vllm-inference")
s = time.perf_counter()
with ThreadPoolExecutor(3) as pool:
    a = pool.submit(_list_all, kube, kube.pods, {NS!r}, {{"label_selector": t.selector}})
    b = pool.submit(_list_all, kube, kube.events, {NS!r},
                    {{"field_selector": event_selector("", t)}})
    c = pool.submit(_list_all, kube, kube.events_v1, {NS!r},
                    {{"field_selector": event_selector("events.k8s.io", t)}})
    pages = [a.result(), b.result(), c.result()]
took = time.perf_counter() - s
print(json.dumps([took, sum(len(p.items) for ps in pages for p in ps)]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    import json

    took, items = json.loads(out.stdout)
    return float(took), float(items)


def _summary(name: str, runs: list[tuple[float, float, int, str]]) -> str:
    times = [r[0] for r in runs]
    med = statistics.median(times)
    verdict = "met" if med < GOAL_S else "MISSED"
    cpu = statistics.median(r[1] for r in runs)
    return (
        f"  {name:<6} wall min {min(times):.2f} s  median {med:.2f} s  max {max(times):.2f} s"
        f"  (goal < {GOAL_S:.0f} s: {verdict});  its own CPU median {cpu:.2f} s;"
        f"  {runs[0][2]} lines"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--deployments", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    nodes = max(2, math.ceil(args.pods / 8 * 1.1))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="bench-coldstart-") as tmp:
        raw = Cluster(Path(tmp) / "cluster")
        start = time.monotonic()
        raw.up(nodes=nodes, timeout=600)
        print(f"cluster: {nodes} kwok 8-GPU nodes up in {time.monotonic() - start:.0f} s")
        live = LiveCluster(raw)
        try:
            install_deploy(live)
            per = math.ceil(args.pods / args.deployments)
            made = 0
            for i in range(args.deployments):
                n = min(per, args.pods - made)
                live.apply([example_deployment(f"bench-cs-{i}", replicas=n, shape=SHAPE, gpus=1)])
                made += n
            start = time.monotonic()
            while _ready(live) < args.pods:
                if time.monotonic() - start > 600:
                    raise SystemExit(f"only {_ready(live)} of {args.pods} pods Ready")
                time.sleep(1)
            events = len(live.events(NS))
            print(
                f"workload: {args.pods} pods in {args.deployments} Deployments Ready in "
                f"{time.monotonic() - start:.0f} s; {events} core/v1 Events in {NS}"
            )
            _spawned(raw.kubeconfig)  # warm: the page cache, the API server's watch cache
            text = [_spawned(Path(raw.kubeconfig)) for _ in range(args.runs)]
            json_ = [_spawned(Path(raw.kubeconfig), "-o", "json") for _ in range(args.runs)]
            load = os.getloadavg()[0]
            print(
                f"\ntime to the first screen, {args.runs} runs each (a new process each run; "
                f"load average {load:.1f} on {os.cpu_count()} CPUs: wall time waits for CPU "
                "when others use it, the process's own CPU time does not):"
            )
            print(_summary("text", text))
            print(_summary("json", json_))
            parts = _parts(Path(raw.kubeconfig))
            lists, items = _split_feed(Path(raw.kubeconfig))
            print(f"\none run in parts ({parts.pop('pods'):.0f} pods):")
            for name, secs in parts.items():
                print(f"  {name:<14} {secs * 1000:7.0f} ms")
            print(f"  (the three lists alone: {lists * 1000:.0f} ms for {items:.0f} objects)")
            print("\nthe screen's first lines:")
            for line in text[0][3].splitlines()[:16]:
                print(f"  {line}")
            print("the screen's last lines:")
            for line in text[0][3].splitlines()[-12:]:
                print(f"  {line}")
        finally:
            raw.down()


if __name__ == "__main__":
    main()
