"""The Kafka runtime with its own kube watch, on the real control plane and a real broker.

`remediator ingest --namespaces` runs serve's list+watch (through a TCP relay to the real
API server, tests/live/faults.py) and publishes every document to the inputs topic; a
`remediator worker` (dry run: what would run is recorded) decides on it. A hung pod is
found by its engine-init budget, and no healthy pod is touched.

Then the watch gap of tests/live/test_behind.py, on Kafka: the relay is paused while
pods of a new workload finish their engine init and a hung one's budget lapses. The
ingest's probe gets no answer, so its word to the partitions says behind; the worker
holds every pod deletion (guard `watch_current`). When the relay flows again the watch
relists, the word says current, and the worker decides again on the fresh picture: only
the hung pod is deleted; the pods that became Ready in the gap never are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.conftest import bootstrap, broker
from tests.kafka.harness import Ingest, Worker, config, recorded
from tests.live.faults import Relay
from tests.live.harness import NS, LiveCluster, example_deployment, wait_for
from tests.live.test_behind import POLICY
from tests.live.test_skew_and_pause import HUNG, on, relayed, uids

__all__ = ["bootstrap", "broker", "relayed"]  # fixtures, shared with their own suites

# Healthy pods Ready ~23 s after they start, inside the 30 s engine-init budget: a gap
# that starts as they start hides their Ready until past every budget.
SLOW_HEALTHY = {"pull": "1s", "init": "1s", "start": "1s", "engine": "20s"}
GAP_S = 45.0


@pytest.fixture
def kafka_run(
    bootstrap: str, relayed: tuple[Relay, Path], tmp_path: Path
) -> Iterator[tuple[Relay, Ingest, Worker]]:
    relay, kubeconfig = relayed
    cfg = config(bootstrap, "kwatch", partitions=4)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    ingest = Ingest(cfg, tmp_path, "0", namespaces=NS, kubeconfig=kubeconfig)
    worker = Worker(cfg, tmp_path, "0", policy=policy, tick_s=1.0,
                    extra=["--ingest-watches", "on"])  # fmt: skip
    try:
        ingest.start()
        ingest.wait_ready(120)  # its watches listed
        worker.start()
        worker.wait_ready(120)
        yield relay, ingest, worker
    finally:
        for p in (ingest, worker):
            p.stop()


def deleted(workdir: Path) -> set[str]:
    """The pods (UIDs) the dry run would have deleted."""
    return {r["uid"] for r in recorded(workdir) if r["action"] == "delete-pod"}


def in_engine_init(w: Worker) -> float:
    status, body = w.get("/metrics")
    prefix = f'remediator_pods_in_phase{{namespace="{NS}",phase="engine_init"}} '
    lines = [x for x in body.decode().splitlines() if x.startswith(prefix)]
    return float(lines[0].split()[-1]) if status == 200 and lines else 0.0


def held(w: Worker) -> list[dict[str, Any]]:
    return [x for x in w.log_lines() if x.get("msg") == "suppressed"
            and x.get("guardrail") == "watch_current"]  # fmt: skip


def test_the_ingest_watches_and_a_gap_holds_deletions_until_it_has_caught_up(
    cluster: LiveCluster,
    kafka_run: tuple[Relay, Ingest, Worker],
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    tmp_path: Path,
) -> None:
    relay, ingest, worker = kafka_run
    # 1. The watch alone brings the pods: the hung one is found, no healthy one touched.
    workloads(on(example_deployment("kw-ok", 2, shape=SLOW_HEALTHY, gpus=1), "kwok"))
    workloads(on(example_deployment("kw-hung", 1, shape=HUNG, gpus=1), "kwok"))
    hung = wait_for(lambda: uids(cluster, "kw-hung"), 30, "the hung pod")
    wait_for(lambda: deleted(tmp_path) >= hung or None, 120, "the hung pod's deletion")
    assert not deleted(tmp_path) & uids(cluster, "kw-ok"), recorded(tmp_path)
    assert not held(worker), "the watch was current throughout"

    # 2. A gap: pods start, the relay stops, healthy ones become Ready unseen.
    before = in_engine_init(worker)
    workloads(on(example_deployment("kw-gap-ok", 2, shape=SLOW_HEALTHY, gpus=1), "kwok"))
    workloads(on(example_deployment("kw-gap-hung", 1, shape=HUNG, gpus=1), "kwok"))
    wait_for(lambda: in_engine_init(worker) >= before + 3 or None, 60, "the gap's pods in init")
    gap_hung = uids(cluster, "kw-gap-hung")
    relay.pause()
    t0 = time.monotonic()
    try:
        wait_for(lambda: len(held(worker)) >= 3 or None, GAP_S, "three deletions held")
        assert b"remediator_behind 1.0" in worker.get("/metrics")[1]
        time.sleep(max(GAP_S - (time.monotonic() - t0), 0))
        healthy = uids(cluster, "kw-gap-ok")
        assert not deleted(tmp_path) & (healthy | gap_hung), recorded(tmp_path)
    finally:
        relay.resume()
    wait_for(lambda: deleted(tmp_path) >= gap_hung or None, 120, "the gap's hung pod, after")
    time.sleep(5)  # anything else the worker would decide
    assert b"remediator_behind 0.0" in worker.get("/metrics")[1]
    assert not deleted(tmp_path) & healthy, recorded(tmp_path)
    assert {str(x.get("why", "")).split(" (")[0] for x in held(worker)} == {"behind"}
    assert ingest.proc is not None and ingest.proc.poll() is None
    failed = [x for x in ingest.log_lines() if x.get("level") in ("error", "critical")]
    assert not failed, failed
