"""Decision latency inside the core, at 10,000 tracked pods (issue 3's performance goal).

Measures, in one run, the time from handing the core the thing that makes a pod stuck to
having the decision out of the guardrails:
  (a) timer path: `Session.advance(now)` across one pod's budget lapsing,
  (b) input path: `Session.feed(alert)` for a firing VLLMEngineInitSlow alert.
Goal: p99 ≤ 1 ms for both. Also checks that every timer decision is made at the exact
virtual time its budget lapsed (0 s late), which is what "found within 1 s" rests on.

    python bench/bench_policy.py [--pods 10000] [--stuck 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.decode import normalize
from remediator.inputs.timefmt import format_time
from remediator.policy.outcome import Ignored
from remediator.policy_file import load_policy
from remediator.session import Session
from remediator.timeline.tracker import StateChange

T0 = 1_760_000_000.0
# Default guardrails (so most of these decisions come out held by blast radius, cooldown or
# rate limit, as they would in a cluster), except min_age, which would hold them all.
POLICY = """
stuck_pod: {checks: 3, check_interval_s: 10, adaptive: {enabled: false}}
guardrails:
  min_age: {factor: 0}
"""


class Sink:
    """Collects what comes out of the guardrails: let through or held, both are decided."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.held = 0

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        self.held += 1
        self.decisions.append(suppressed.decision)

    def ignored(self, ignored: Ignored) -> None:
        pass


def _ts(offset: float) -> str:
    return format_time(T0 + offset)


def pod_doc(i: int, started: float) -> dict[str, Any]:
    return {
        "type": "MODIFIED",
        "object": {
            "kind": "Pod",
            "metadata": {
                "name": f"vllm-70b-7c9d5b6f4-{i:06d}",
                "namespace": "llm",
                "uid": f"{i:08x}-0000-4000-8000-000000000000",
                "creationTimestamp": _ts(started - 300),
                "labels": {"app": "vllm-inference", "pod-template-hash": "7c9d5b6f4"},
                "ownerReferences": [
                    {"kind": "ReplicaSet", "name": "vllm-70b-7c9d5b6f4", "controller": True}
                ],
            },
            "spec": {
                "nodeName": f"gpu-{i % 500}",
                "containers": [
                    {
                        "name": "vllm",
                        "args": ["--model", "meta-llama/Llama-3.1-70B-Instruct"],
                        "resources": {"limits": {"nvidia.com/gpu": "2"}},
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "True",
                        "lastTransitionTime": _ts(started - 200),
                    }
                ],
                "containerStatuses": [
                    {
                        "name": "vllm",
                        "restartCount": 0,
                        "state": {"running": {"startedAt": _ts(started)}},
                    }
                ],
            },
        },
    }


def deployment_doc(replicas: int) -> dict[str, Any]:
    return {
        "type": "ADDED",
        "object": {
            "kind": "Deployment",
            "metadata": {"name": "vllm-70b", "namespace": "llm", "uid": "d1", "generation": 1},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": []}}},
        },
    }


def alert_doc(i: int, at: float) -> dict[str, Any]:
    return {
        "version": "4",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "VLLMEngineInitSlow",
                    "namespace": "llm",
                    "pod": f"vllm-70b-7c9d5b6f4-{i:06d}",
                },
                "startsAt": _ts(at),
                "fingerprint": f"{i:016x}",
            }
        ],
    }


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument(
        "--stuck", type=int, default=2_000, help="pods whose budget lapses (timer path)"
    )
    args = ap.parse_args()

    session, sink = Session(load_policy(POLICY)), Sink()
    # Pods enter engine_init 1 ms apart, so every deadline lies after the last pod is fed.
    step = 0.001
    session.feed(normalize(deployment_doc(args.pods))[0], sink)  # replicas, for blast radius
    items = [normalize(pod_doc(i, i * step))[0] for i in range(args.pods)]
    for item in items:
        session.feed(item, sink)
    allowance = 60 + 2 * 10
    print(f"tracked pods: {len(session.tracker)}; timers armed: {len(session.engine._timers)}")

    # (a) the timer path: step the clock over each of the first `stuck` deadlines.
    timer_lat: list[float] = []
    lateness: list[float] = []
    for i in range(args.stuck):
        due = T0 + i * step + allowance
        before = len(sink.decisions)
        t = time.perf_counter()
        session.advance(due + step / 10, sink)  # float rounding: a hair past the due time
        timer_lat.append(time.perf_counter() - t)
        made = sink.decisions[before:]
        assert len(made) == 1, f"expected one decision at step {i}, got {len(made)}"
        lateness.append(made[0].at - due)

    # (b) the input path: a firing alert for a pod still in engine init.
    alerts = [
        normalize(alert_doc(i, args.stuck * step + allowance - 0.5))[0]
        for i in range(args.stuck, min(args.pods, args.stuck + 2_000))
    ]
    input_lat: list[float] = []
    for item in alerts:
        before = len(sink.decisions)
        t = time.perf_counter()
        session.feed(item, sink)
        input_lat.append(time.perf_counter() - t)
        assert len(sink.decisions) == before + 1

    for name, lat in (("timer path (advance)", timer_lat), ("input path (alert)", input_lat)):
        us = [x * 1e6 for x in lat]
        print(
            f"{name:22} n={len(us):5}  p50 {statistics.median(us):7.1f} µs  "
            f"p99 {pct(us, 0.99):7.1f} µs  max {max(us):8.1f} µs   "
            f"p99/goal(1 ms) = {pct(us, 0.99) / 1000:.3f}"
        )
    print(f"timer decisions made late (virtual time): max {max(lateness):.3f} s (goal ≤ 1 s)")
    print(
        f"outcomes: {len(sink.decisions) - sink.held} let through, {sink.held} held by guardrails"
    )


if __name__ == "__main__":
    main()
