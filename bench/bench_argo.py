"""From a decision to its Workflow: the real Argo on the real control plane, beside the stand-in.

    .venv/bin/python bench/bench_argo.py [--decisions 50] [--every 0.2] [--poll 0.1]

Starts its own cluster (tests/cluster, 2 kwok GPU nodes) and the real workflow-controller and
Argo Server (tests/cluster/argo.py, steps not held: the kwok Stage ends each step pod after its
`run` time, 1 s, without running it), then in one run, side by side, submits the same stream of
delete-pod decisions (one every `--every` s, each its own workload lock) through the executor
(`ArgoExecutor.submit` then `track`, the argo-workflows SDK):

  (a) to the real Argo Server: decision -> the Workflow exists in the API server (a watch on it)
      and -> it is Succeeded (what `track` returns, polling every `--poll` s);
  (b) to the stand-in Argo Server (tests/standins/argo_server.py): -> exists (its submit
      answered) and -> Succeeded (its scripted Pending, Running, Succeeded, one per GET).

Prints p50/p99/max of each and the ratios real / stand-in. Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch  # type: ignore[import-untyped]

from remediator.contract.decision import Decision
from remediator.executors.argo import ArgoConfig, ArgoExecutor

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "cluster")]

from argo import NAMESPACE, Argo  # noqa: E402
from cluster import Cluster  # noqa: E402

from tests.standins.argo_server import ArgoStandin  # noqa: E402

STANDIN_TOKEN = "bench-argo-token"


def decision(i: int) -> Decision:
    return Decision(
        action="delete-pod",
        namespace="llm-inference",
        target=f"vllm-bench-{i}",
        reason="engine_init 75s > budget 60s (bench)",
        incident=f"bench-stuck-vllm-bench-{i}-{int(time.time())}",
        at=time.time(),
        uid=f"00000000-0000-4000-8000-{i:012d}",
        workload=f"llm-inference/Deployment/vllm-bench-{i}",
    )


class Appeared:
    """When each Workflow first appears in the API server, from a watch (monotonic clock)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.at: dict[str, float] = {}
        self._stop = threading.Event()
        api = client.CustomObjectsApi(config.new_client_from_config(str(kubeconfig)))
        self._ready = threading.Event()
        threading.Thread(target=self._loop, args=(api,), daemon=True).start()
        self._ready.wait(30)

    def _loop(self, api: Any) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            self._ready.set()
            stream = w.stream(
                api.list_namespaced_custom_object,
                "argoproj.io", "v1alpha1", NAMESPACE, "workflows", timeout_seconds=5,
            )  # fmt: skip
            for event in stream:
                name = event["object"]["metadata"]["name"]
                self.at.setdefault(name, time.monotonic())

    def stop(self) -> None:
        self._stop.set()


async def run(
    executor: ArgoExecutor, n: int, every: float, appeared: Appeared | None
) -> tuple[list[float], list[float]]:
    exists: list[float] = []
    done: list[float] = []

    async def one(i: int) -> None:
        d = decision(i)
        t0 = time.monotonic()
        sub = await executor.submit(d)
        t_sub = time.monotonic()
        ended = await executor.track(sub.name, timeout_s=300)
        t_end = time.monotonic()
        assert ended.phase == "Succeeded", ended
        if appeared is not None:
            exists.append(appeared.at.get(sub.name, t_sub) - t0)
        else:
            exists.append(t_sub - t0)
        done.append(t_end - t0)

    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(one(i)))
        await asyncio.sleep(every)
    await asyncio.gather(*tasks)
    return exists, done


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


def line(label: str, xs: list[float]) -> str:
    return (
        f"{label:<34} p50 {pct(xs, 50) * 1000:8.1f} ms   p99 {pct(xs, 99) * 1000:8.1f} ms"
        f"   max {max(xs) * 1000:8.1f} ms   mean {statistics.fmean(xs) * 1000:8.1f} ms"
    )


def install_identities(argo: Argo) -> None:
    """What the workflows need from deploy/: their ServiceAccount, and serve's submit Role."""
    argo.cluster.apply(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "remediator"}}]
    )
    argo.cluster.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "remediator", "namespace": "remediator"},
            }
        ]
    )
    act = REPO / "deploy" / "components" / "act"
    for name in ("workflow-serviceaccount.yaml", "argo-submit.yaml"):
        argo.apply_yaml((act / name).read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--decisions", type=int, default=50)
    ap.add_argument("--every", type=float, default=0.2, help="seconds between decisions")
    ap.add_argument("--poll", type=float, default=0.1, help="track() poll interval, both paths")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-argo-") as tmp:
        cluster = Cluster(Path(tmp) / "cluster")
        t = time.monotonic()
        cluster.up(nodes=2)
        argo = Argo(cluster)
        try:
            argo.up(hold_steps=False)
            argo.install_templates()
            install_identities(argo)
            print(f"cluster + argo ready in {time.monotonic() - t:.1f} s", file=sys.stderr)
            os.environ["BENCH_ARGO_TOKEN"] = cluster.token("remediator", "remediator")
            real = ArgoExecutor(
                ArgoConfig(host=argo.server_url, namespace=NAMESPACE, token_env="BENCH_ARGO_TOKEN"),
                poll_interval_s=args.poll,
            )
            appeared = Appeared(cluster.kubeconfig)
            real_exists, real_done = asyncio.run(run(real, args.decisions, args.every, appeared))
            appeared.stop()
        finally:
            argo.down()
            cluster.down()

    with ArgoStandin(token=STANDIN_TOKEN) as standin:
        os.environ["BENCH_STANDIN_TOKEN"] = STANDIN_TOKEN
        fake = ArgoExecutor(
            ArgoConfig(host=standin.url, namespace=NAMESPACE, token_env="BENCH_STANDIN_TOKEN"),
            poll_interval_s=args.poll,
        )
        fake_exists, fake_done = asyncio.run(run(fake, args.decisions, args.every, None))

    n = args.decisions
    print(
        f"{n} delete-pod decisions, one every {args.every} s, track() polling every {args.poll} s"
    )
    print(line("real Argo: decision -> exists", real_exists))
    print(line("stand-in:  decision -> exists", fake_exists))
    print(line("real Argo: decision -> Succeeded", real_done))
    print(line("stand-in:  decision -> Succeeded", fake_done))
    for q in (50, 99):
        print(
            f"ratio real / stand-in p{q}: exists {pct(real_exists, q) / pct(fake_exists, q):.1f}x,"
            f" Succeeded {pct(real_done, q) / pct(fake_done, q):.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
