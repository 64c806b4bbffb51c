"""Throughput and memory of the event core on a realistic watch stream (issue 2, Performance).

    python bench/bench_core.py [--pods N] [--memory-pods M] [--repeat R]

In one run, on the same generated stream (tests.simstream): (a) bare orjson.loads per line,
(b) the full core (decode + normalise + Tracker + TimelineMetrics, through Session.feed),
(c) the kubernetes client's model path, exactly as kubernetes.watch.Watch.stream does it.
Then memory per tracked pod at --memory-pods pods, and a cProfile of (b).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import kubernetes  # noqa: E402
from kubernetes import client  # noqa: E402
from kubernetes.watch import Watch  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from remediator.contract.decision import Decision, Suppressed  # noqa: E402
from remediator.inputs.decode import decode  # noqa: E402
from remediator.inputs.timefmt import parse_time  # noqa: E402
from remediator.metrics.timeline_metrics import TimelineMetrics  # noqa: E402
from remediator.policy.outcome import Ignored  # noqa: E402
from remediator.session import Session  # noqa: E402
from remediator.timeline.tracker import StateChange, Tracker  # noqa: E402
from tests.simstream import watch_stream  # noqa: E402

GOAL_VS_ORJSON = 0.5
GOAL_VS_CLIENT = 15.0
GOAL_BYTES_PER_POD = 2048


class NoSink:
    """Session's Sink that drops everything: the benchmark measures the core, not output."""

    def transition(self, change: StateChange) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        pass

    def suppressed(self, suppressed: Suppressed) -> None:
        pass

    def ignored(self, ignored: Ignored) -> None:
        pass


def path_orjson(lines: Sequence[bytes]) -> None:
    loads = orjson.loads
    for line in lines:
        loads(line)


class Core:
    """The issue's core: decode + normalise + timeline + metrics, on the inputs' own clock.

    This is Session.feed without the policy engine and guardrails (measured apart, (b+))."""

    def __init__(self) -> None:
        self.tracker = Tracker()
        self.metrics = TimelineMetrics(CollectorRegistry())
        self.now = 0.0

    def feed_line(self, line: bytes) -> None:
        for item in decode(line):
            if item.at is not None and item.at > self.now:
                self.now = item.at
            change = self.tracker.apply(item, self.now)
            if change is not None:
                self.metrics.observe(change)


def path_core(lines: Sequence[bytes]) -> Core:
    parse_time.cache_clear()  # each run starts cold: no timestamps seen before
    core = Core()
    feed = core.feed_line
    for line in lines:
        feed(line)
    return core


def path_session(lines: Sequence[bytes]) -> Session:
    parse_time.cache_clear()
    session, sink = Session(), NoSink()
    feed = session.feed
    for line in lines:
        for item in decode(line):
            feed(item, sink)
    return session


def _return_types() -> dict[tuple[str, str], str]:
    """What Watch.stream deserialises into, found the way the watch finds it."""
    w = Watch()
    return {
        ("Pod", "v1"): w.get_return_type(client.CoreV1Api().list_namespaced_pod),
        ("Event", "v1"): w.get_return_type(client.CoreV1Api().list_namespaced_event),
        ("Event", "events.k8s.io/v1"): w.get_return_type(
            client.EventsV1Api().list_namespaced_event
        ),
    }


def client_inputs(lines: Sequence[bytes]) -> list[tuple[bytes, str]]:
    """Pair each line with the model its watch (pods, core events, events.k8s.io) returns."""
    types = _return_types()
    out = []
    for line in lines:
        obj = orjson.loads(line)["object"]
        out.append((line, types[(obj["kind"], obj["apiVersion"])]))
    return out


def path_client(pairs: Sequence[tuple[bytes, str]], rejected: list[str]) -> None:
    # One Watch per resource in real life; the per-line work is Watch.stream's loop body:
    # iter_resp_lines decodes the bytes, unmarshal_event json.loads, json.dumps the object
    # and ApiClient.deserialize's it into the model.
    watch = Watch()
    for line, return_type in pairs:
        try:
            watch.unmarshal_event(line.decode("utf-8", errors="replace"), return_type)
        except ValueError as exc:  # pydantic's ValidationError: the watch would raise it
            rejected.append(f"{return_type}: {str(exc).splitlines()[1:3]}")


def best_of(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Best wall time of each run, the runs interleaved so that a burst of load from
    elsewhere on the machine hits all of them alike rather than one."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            gc.collect()
            t0 = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def memory_per_pod(pods: int) -> tuple[float, list[str]]:
    """Bytes retained per tracked pod (tracker + metrics + caches) after pods ADDED+MODIFIED.

    The stream is generated in a child process and read through a pipe, as a watch reads
    its socket: tracemalloc then traces the core's allocations only, and runs 2x sooner."""
    parse_time.cache_clear()
    gc.collect()
    child = subprocess.Popen(
        [sys.executable, "-c", _GENERATE, str(pods)],
        stdout=subprocess.PIPE,
        cwd=_REPO,
        bufsize=1 << 20,
    )
    assert child.stdout is not None
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    base, _ = tracemalloc.get_traced_memory()
    core = Core()
    for line in child.stdout:
        core.feed_line(line)
    if child.wait() != 0:
        raise SystemExit("the stream generator failed")
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(core.tracker) == pods, "every pod must be tracked"
    top = after.compare_to(before, "lineno")[:6]
    where = [f"{s.size_diff / pods:7.0f} B/pod  {s.traceback[0]}" for s in top]
    return (held - base) / pods, where


_REPO = Path(__file__).resolve().parents[1]
_GENERATE = (
    "import sys\n"
    "from tests.simstream import tracked_pods\n"
    "out = sys.stdout.buffer\n"
    "for line in tracked_pods(int(sys.argv[1]), seed=1):\n"
    "    out.write(line + b'\\n')\n"
)


def profile_core(lines: Sequence[bytes], limit: int) -> str:
    prof = cProfile.Profile()
    prof.runcall(path_core, lines)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(limit)
    body = out.getvalue()
    return body[body.index("   ncalls") :] if "   ncalls" in body else body


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pods", type=int, default=2000, help="pods in the throughput stream")
    ap.add_argument("--memory-pods", type=int, default=100_000, help="pods tracked for memory")
    ap.add_argument("--repeat", type=int, default=5, help="runs of (a) and (b); best is kept")
    ap.add_argument("--client-repeat", type=int, default=2, help="runs of (c); best is kept")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile-lines", type=int, default=18, help="cProfile rows (0: none)")
    args = ap.parse_args(argv)

    lines = [line for line, _ in watch_stream(args.pods, seed=args.seed)]
    pods_only = [x for x in lines if b'"object":{"kind":"Pod"' in x[:50]]
    events_only = [x for x in lines if b'"object":{"kind":"Event"' in x[:50]]
    pod_lines = len(pods_only)
    size = sum(map(len, lines))
    print(f"stream: {args.pods} pods, {len(lines)} watch events ({pod_lines} Pod, "
          f"{len(lines) - pod_lines} Event), {size / len(lines):.0f} B/line avg, "
          f"{size / 1e6:.1f} MB")  # fmt: skip
    print(f"python {sys.version.split()[0]}, orjson {orjson.__version__}, "
          f"kubernetes {kubernetes.__version__}")  # fmt: skip

    pairs = client_inputs(lines)
    rejected: list[str] = []
    fast = best_of(
        {
            "a": lambda: path_orjson(lines),
            "b": lambda: path_core(lines),
            "b+": lambda: path_session(lines),
        },
        args.repeat,
    )
    slow = best_of({"c": lambda: path_client(pairs, rejected)}, args.client_repeat)
    a, b, b_plus, c = fast["a"], fast["b"], fast["b+"], slow["c"]
    rejected = rejected[: len(rejected) // args.client_repeat]
    n = len(lines)
    print()
    print(f"{'path':<46}{'lines/s':>12}{'µs/event':>10}")
    for name, secs in (
        ("(a) orjson.loads", a),
        ("(b) core: decode+Tracker+TimelineMetrics", b),
        ("(b+) Session.feed (core+policy+guardrails)", b_plus),
        ("(c) kubernetes client Watch.unmarshal_event", c),
    ):
        print(f"{name:<46}{n / secs:>12,.0f}{secs / n * 1e6:>10.1f}")
    print()
    print("µs per line by kind:      (a) orjson   (b) core   (c) client")
    for kind, sub in (("Pod (~6 KB)", pods_only), ("Event (~0.9 KB)", events_only)):
        sub_pairs = client_inputs(sub)
        t = best_of({"a": lambda s=sub: path_orjson(s), "b": lambda s=sub: path_core(s)}, 3)
        tc = best_of({"c": lambda p=sub_pairs: path_client(p, [])}, 1)["c"]
        per = [t["a"] / len(sub) * 1e6, t["b"] / len(sub) * 1e6, tc / len(sub) * 1e6]
        print(f"  {kind:<22}{per[0]:>10.1f}{per[1]:>11.1f}{per[2]:>11.1f}")
    if rejected:
        print(f"    (c) rejected {len(rejected)} lines, e.g. {rejected[0]}")
    ab, bc = a / b, c / b
    print()
    print(
        f"b/a = {ab:.2f}  (goal >= {GOAL_VS_ORJSON})  {'OK' if ab >= GOAL_VS_ORJSON else 'MISSED'}"
    )
    print(
        f"b/c = {bc:.1f}  (goal >= {GOAL_VS_CLIENT})  {'OK' if bc >= GOAL_VS_CLIENT else 'MISSED'}"
    )

    if args.memory_pods:
        t0 = time.perf_counter()
        per_pod, where = memory_per_pod(args.memory_pods)
        ok = "OK" if per_pod <= GOAL_BYTES_PER_POD else "MISSED"
        print()
        secs = time.perf_counter() - t0
        print(f"memory: {per_pod:,.0f} B per tracked pod at {args.memory_pods:,} pods "
              f"(goal <= {GOAL_BYTES_PER_POD} B)  {ok}  [{secs:.0f} s]")  # fmt: skip
        print("  largest holders (tracemalloc, by line):")
        for row in where:
            print("  " + row)

    if args.profile_lines:
        print()
        print("profile of (b), by own time:")
        print(profile_core(lines, args.profile_lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
