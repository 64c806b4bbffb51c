"""The Kafka runtime's logic without Kafka: partitions and the guard, fed in-process.

The same records the workers would exchange, partitioned with aiokafka's own
partitioner (the one the ingest uses), in an order a broker could deliver them.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import orjson
import pytest
from aiokafka.partitioner import DefaultPartitioner
from prometheus_client import CollectorRegistry

from remediator.contract.codec import encode
from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import GotThrough, GpuNews
from remediator.guard.hedge_budget import HedgeBudgetState
from remediator.inputs.decode import decode as decode_input
from remediator.inputs.kinds import owner_key
from remediator.inputs.records import InputError
from remediator.policy_file import PolicyFile, load_policy, load_policy_file
from remediator.runtime.clock import ClusterTime, VirtualClock
from remediator.streams.core import (
    Candidate,
    GuardCore,
    Learned,
    PartitionCore,
    Watermark,
    feedback_record,
    parse_guard_record,
    tick_record,
)
from remediator.streams.keys import BROADCAST, arrived, command_key, owner, split
from tests.kafka.differential import feedback_targets
from tests.kafka.harness import chunks, embedded, key
from tests.policy import test_min_age_estimate as estimate
from tests.policy import test_unsettled_node as unsettled
from tests.policy.builders import T0, deployment, pod
from tests.policy.conftest import RELAXED, make_run
from tests.policy.test_dry_run_same_path import UID_B
from tests.runtime.test_cluster_time import HEALTHY, HOUR, SKEWED, on_node
from tests.runtime.test_cluster_time import POLICY as CLOCK_POLICY
from tests.runtime.test_virtual_clock import T0 as CT0
from tests.runtime.test_virtual_clock import iso

N = 8
# A static engine-init budget above the stream's (~236 s): below it the engine holds
# deletions as "budget too tight" on evidence of history, learned per partition.
NO_ADAPTIVE = "stuck_pod:\n  adaptive: {enabled: false}\n  budgets: {engine_init: 400}\n"


class Cluster:
    """N partition cores and the guard, records handed over as a broker would."""

    def __init__(self, policy: PolicyFile, seed: int = 0) -> None:
        self.cores = [PartitionCore(policy, p, N, CollectorRegistry()) for p in range(N)]
        self.guard = GuardCore(policy, N)
        self.decided: list[Decision] = []
        self.partitioner = DefaultPartitioner()
        self.rng = random.Random(seed)

    def publish(self, body: bytes) -> None:
        for record in split(body):
            if record.key == BROADCAST:
                for p in range(N):
                    self.run(p, record.value)
            else:
                everyone = list(range(N))
                self.run(self.partitioner(record.key.encode(), everyone, everyone), record.value)

    def tick(self, at: float) -> None:
        order = list(range(N))
        self.rng.shuffle(order)  # partitions report in any order
        for p in order:
            self.run(p, tick_record(at))

    def run(self, p: int, raw: bytes) -> None:
        queue = [(p, raw)]
        while queue:
            p, raw = queue.pop(0)
            records: list[Candidate | Learned | Watermark] = list(self.cores[p].feed(raw))
            if raw.startswith(b'{"remediator":"tick"'):
                records.append(Watermark(p, self.cores[p].now))
            for record in records:
                wire = parse_guard_record(encode(record))  # as it crosses the topic
                for released in self.guard.take(wire):
                    if isinstance(released.result, Decision):
                        self.decided.append(released.result)
                    fb = released.feedback
                    for q in feedback_targets(fb, released.origin, N):
                        assert fb is not None
                        queue.append((q, feedback_record(fb)))


@pytest.fixture(scope="module")
def stream():
    return chunks(80, 3, 30.0, 600.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_partitions_and_guard_decide_as_one_session(tmp_path, stream, seed) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(NO_ADAPTIVE)
    policy = load_policy_file(str(path))
    cluster = Cluster(policy, seed)
    for chunk in stream:
        for line in chunk.lines:
            cluster.publish(line)
        cluster.tick(chunk.until)
    expected = embedded(stream, policy)
    assert expected, "the stream must make decisions"
    assert sorted(map(key, cluster.decided)) == sorted(map(key, expected))


def test_the_guard_waits_for_every_partition() -> None:
    guard = GuardCore(PolicyFile(), partitions=2)
    d = Decision("notify", "ns", "pod-a", "why", "inc-1", 100.0)
    assert guard.take(Candidate(d, 100.0, 0)) == []
    assert guard.take(Watermark(0, 200.0)) == []  # partition 1 may still send older ones
    assert guard.frontier == 100.0 or guard.frontier == -math.inf
    released = guard.take(Watermark(1, 150.0))
    assert [r.result.incident for r in released if isinstance(r.result, Decision)] == ["inc-1"]


def stuck(pod: str, incident: str, at: float) -> Decision:
    return Decision(
        "delete-pod", "ns", pod, "why", incident, at, uid=pod, workload="ns/Deployment/w",
        pod_created_at=at - 3600.0, expected_cold_start_s=60.0,
    )  # fmt: skip


def test_the_guard_releases_in_time_order_whatever_the_arrival() -> None:
    # a cooldown, which the defaults no longer have (docs/simulation-defaults.md)
    guard = GuardCore(load_policy("guardrails: {cooldown: {seconds: 30}}"), partitions=2)
    late, early = stuck("pod-b", "inc-b", 50.0), stuck("pod-a", "inc-a", 40.0)
    guard.take(Candidate(late, 50.0, 1))
    guard.take(Candidate(early, 40.0, 0))
    guard.take(Watermark(0, 60.0))
    out = guard.take(Watermark(1, 60.0))
    # One workload: the first deletion cools the second down, first by time, not arrival.
    said = [(type(r.result).__name__, getattr(r.result, "guardrail", None), r.origin) for r in out]
    assert said == [("Decision", None, 0), ("Suppressed", "cooldown", 1)]


def test_guard_state_round_trips_through_its_table_value() -> None:
    guard = GuardCore(PolicyFile(), partitions=2)
    d = Decision("notify", "ns", "pod-a", "why", "inc-1", 100.0)
    guard.take(Candidate(d, 100.0, 0, "llama"))
    guard.take(Learned(90.0, 1, (("llama", "total", 300.0),)))
    guard.take(Watermark(0, 95.0))
    again = GuardCore.from_json(PolicyFile(), 2, guard.to_json())
    assert again.to_json() == guard.to_json()
    assert again.take(Watermark(1, 120.0)) == guard.take(Watermark(1, 120.0))


def test_a_rebuilt_partitions_second_sending_is_heard_once() -> None:
    """A partition rebuilt after its worker died sends again what it learned from records
    the dead worker may have sent on already (`Learned.source`: the same places): the guard
    learns, pays and relays each place once, and still after its own restore."""
    guard = GuardCore(PolicyFile(), partitions=2)
    first = Learned(30.0, 1, (("m", "total", 90.0),), GpuNews(gpu_s=600.0), source=(7, 0))
    later = Learned(35.0, 1, (("m", "total", 95.0),), GpuNews(gpu_s=400.0), source=(9, 0))
    sent = [first, Watermark(0, 40.0), Watermark(1, 40.0)]
    sent += [first, later, Watermark(1, 50.0), Watermark(0, 50.0)]  # the rebuilt partition's
    relayed = [r.feedback for s in sent for r in guard.take(s) if isinstance(r.feedback, Learned)]
    assert [r.source for r in relayed] == [(7, 0), (9, 0)]
    assert guard.learned["m\ntotal"] == [90.0, 95.0]
    assert guard.state.of("hedge_budget", HedgeBudgetState).paid == 1000.0
    again = GuardCore.from_json(PolicyFile(), 2, guard.to_json())
    assert again.heard == {1: (9, 0)}
    assert again.take(later) == [] and again.learned == guard.learned
    newer = Learned(45.0, 1, (("m", "total", 99.0),), source=(9, 1))
    assert [r.feedback for r in again.take(newer)] == [newer]


def test_a_redelivered_decision_is_let_through_once() -> None:
    guard = GuardCore(PolicyFile(), partitions=1)
    d = Decision("notify", "ns", "pod-a", "why", "inc-1", 100.0, uid="a")
    first = guard.take(Candidate(d, 100.0, 0)) + guard.take(Watermark(0, 100.0))
    again = guard.take(Candidate(d, 100.0, 0))  # behind the frontier: judged at once
    assert [type(r.result).__name__ for r in first] == ["Decision"]
    assert [type(r.result).__name__ for r in again] == ["Suppressed"]


def test_bad_input_is_refused_whole() -> None:
    with pytest.raises(InputError):
        split(b'{"version": "4", "alerts": [{"labels": 3}]}')
    with pytest.raises(InputError):
        split(b"not json")


def test_an_alert_group_is_cut_by_pod() -> None:
    alert = {"status": "firing", "startsAt": "2025-03-01T08:00:00Z", "fingerprint": "f"}
    doc = {"version": "4", "groupKey": "g", "status": "firing", "alerts": [
        {**alert, "labels": {"alertname": "Stuck", "namespace": "llm", "pod": "a"}},
        {**alert, "labels": {"alertname": "Stuck", "namespace": "llm", "pod": "b"}},
        {**alert, "labels": {"alertname": "Stuck", "namespace": "llm", "pod": "a"}},
    ]}  # fmt: skip
    records = split(orjson.dumps(doc))
    assert sorted((r.key, len(r.inputs)) for r in records) == [("llm/a", 2), ("llm/b", 1)]


def test_an_engine_step_goes_with_its_pod() -> None:
    from remediator.inputs.records import EngineStep
    from remediator.streams.keys import key_of

    step = EngineStep("llm", "vllm-0", None, "weights_loaded", 12.5, None, 1.0)
    assert key_of(step) == "llm/vllm-0"


def test_otlp_spans_of_several_pods_are_cut_by_pod() -> None:
    """What /v1/traces stores (an EngineSpanList) travels per pod, each part its records."""
    from remediator.inputs.otlp import PROTOBUF, decode_traces
    from tests.inputs.otlp_requests import Process, S, SpanSpec, pod_attrs, protobuf

    spans = [SpanSpec("Load model", S, 40 * S), SpanSpec("Compile graph", 48 * S, 60 * S)]
    body = protobuf(
        [Process(pod_attrs("llm", "a"), spans), Process(pod_attrs("llm", "b"), spans[:1])]
    )
    batch = decode_traces(body, PROTOBUF)
    records = split(orjson.dumps(batch.stored()))
    assert sorted((r.key, len(r.inputs)) for r in records) == [
        ("llm/a", 1),
        ("llm/a", 1),
        ("llm/b", 1),
    ]  # one record per span, as a List's items
    assert sorted((i for r in records for i in r.inputs), key=batch.spans.index) == batch.spans


def test_a_deletion_in_one_partition_holds_the_kill_loop_in_another() -> None:
    """Issue 19: what got through goes back to every partition (`GotThrough`, with the
    phase it was decided in), so the kill-loop guard works on Kafka as in one process:
    pod A of a workload is deleted for being slow in engine init (partition 0); its
    replacement B, in partition 1, is as slow: held, and on-call told the budget looks too
    tight, once; never deleted."""
    policy = load_policy(RELAXED + "  blast_radius: {window_s: 1}\n")
    cores = [PartitionCore(policy, p, 2) for p in range(2)]
    guard = GuardCore(policy, 2)
    decided: list[Decision] = []

    def run(p: int, doc: bytes) -> None:
        queue = [(p, doc)]
        while queue:
            p, raw = queue.pop(0)
            records: list[Candidate | Learned | Watermark] = list(cores[p].feed(raw))
            if raw.startswith(b'{"remediator":"tick"'):
                records.append(Watermark(p, cores[p].now))
            for record in records:
                for released in guard.take(parse_guard_record(encode(record))):
                    if isinstance(released.result, Decision):
                        decided.append(released.result)
                    if isinstance(released.feedback, GotThrough):
                        queue.extend((q, feedback_record(released.feedback)) for q in (0, 1))

    def tick(at: float) -> None:
        for p in (0, 1):
            run(p, tick_record(at))

    run(0, orjson.dumps(pod(created=0, scheduled=1, started=10)))
    tick(T0 + 95)
    run(0, orjson.dumps(pod(created=0, scheduled=1, started=10, watch="DELETED")))
    b = "vllm-70b-7c9d5b6f4-fghij"
    run(1, orjson.dumps(pod(b, UID_B, watch="ADDED", created=96, scheduled=97, started=100)))
    tick(T0 + 400)
    assert [(d.action, d.target) for d in decided] == [
        ("delete-pod", "vllm-70b-7c9d5b6f4-abcde"),
        ("notify", b),
    ]
    assert "too tight" in decided[1].reason


@pytest.mark.parametrize("skew", [HOUR, -HOUR])
def test_a_partitions_clock_moves_on_api_server_stamps_only(skew: float) -> None:
    """Issue 19: a partition keeps serve's clock rule (issue 18): only the API server's
    stamps move it, so one node's kubelet an hour ahead ages no pod, its own or another
    node's, by an hour. Five pods on a good node, five on a skewed one, all started at T0
    on the API server's clock, 300 s engine-init budget."""
    core = PartitionCore(load_policy(CLOCK_POLICY), 0, 1)
    out: list[Candidate | Learned] = []
    for name in HEALTHY:
        out += core.feed(orjson.dumps(on_node(name, "gpu-good", CT0)))
    for name in SKEWED:
        out += core.feed(orjson.dumps(on_node(name, "gpu-skewed", CT0, skew)))
    assert core.now <= CT0 + 1
    out += core.feed(tick_record(CT0 + 20))
    assert [c for c in out if isinstance(c, Candidate)] == [] and core.now == CT0 + 20
    out += core.feed(tick_record(CT0 + 302))
    found = [c.decision for c in out if isinstance(c, Candidate)]
    assert sorted(d.target for d in found) == sorted(HEALTHY + SKEWED)
    assert {d.at for d in found} <= {CT0 + 300, CT0 + 301}


SLOW_MODEL = """
stuck_pod: {budgets: {engine_init: 60}, checks: 1, adaptive: {enabled: false}}
guardrails: {min_age: {factor: 0}}
"""


def test_what_one_partition_learned_judges_the_pods_of_another() -> None:
    """Issue 19: the history a budget is judged by is the cluster's, as in one process. Pod
    A (partition 0) took 190 s in engine init; B, of the same model in partition 1, is 90 s
    into a 60 s budget: the budget, not B, looks wrong (every recent pod of the model took
    longer), so on-call is told and B is held, not deleted."""
    policy = load_policy(SLOW_MODEL)
    cluster = Cluster(policy)
    cluster.run(0, orjson.dumps(pod(watch="ADDED", created=0, scheduled=1, started=10,
                                    ready=200)))  # fmt: skip
    cluster.tick(T0 + 210)
    b = "vllm-70b-7c9d5b6f4-fghij"
    cluster.run(1, orjson.dumps(pod(b, UID_B, watch="ADDED", created=205, scheduled=206,
                                    started=210)))  # fmt: skip
    for at in (240, 270, 300):
        cluster.tick(T0 + at)
    assert [(d.action, d.target) for d in cluster.decided] == [("notify", b)]
    assert "100% of the last 1 pods of this model took longer" in cluster.decided[0].reason


def test_a_too_tight_budget_is_told_once_for_the_cluster() -> None:
    """Issue 19: the "budget looks too tight" notice is told once per budget, as one process
    tells it, though two partitions hold pods of the workload in the same tick (neither
    has heard of the other's notice yet): the guard drops the second, silently."""
    cluster = Cluster(load_policy(SLOW_MODEL))
    cluster.run(0, orjson.dumps(pod(watch="ADDED", created=0, scheduled=1, started=10,
                                    ready=200)))  # fmt: skip
    cluster.tick(T0 + 210)
    x, y = "vllm-70b-7c9d5b6f4-xxxxx", "vllm-70b-7c9d5b6f4-yyyyy"
    for p, name, uid in ((0, x, "x" + UID_B[1:]), (1, y, UID_B)):
        cluster.run(p, orjson.dumps(pod(name, uid, watch="ADDED", created=205, scheduled=206,
                                        started=210)))  # fmt: skip
    for at in (240, 270, 300, 330):
        cluster.tick(T0 + at)
    assert [d.action for d in cluster.decided] == ["notify"]
    assert cluster.guard.take(Watermark(0, T0 + 330)) == []  # and nothing said of the other


def test_a_pods_timer_fires_at_the_clusters_time_not_its_partitions() -> None:
    """Issue 19: each record carries the cluster's time the ingest took it at (the newest
    API-server stamp it saw, on any partition), and a partition applies it then, as serve
    does. Pod X (partition 0) is 300 s into engine init when pod Y (partition 1) is
    stamped 10 s later: one process deletes X at its budget's end, before X's deletion
    by someone else (stamped before) arrives; so does X's partition, whose own inputs
    never said the time had come."""
    cluster = ClusterTime(VirtualClock(0.0))  # the ingest's, standing still: stamps only
    cores = [PartitionCore(load_policy(CLOCK_POLICY), p, 2) for p in range(2)]
    out: list[Candidate | Learned] = []

    def ingest(p: int, doc: dict[str, Any]) -> None:
        records = split(orjson.dumps(doc))
        at = arrived(records, cluster)
        for record in records:
            out.extend(cores[p].feed(record.value, at))

    x = on_node("x", "gpu-good", CT0)
    ingest(0, x)
    ingest(1, on_node("y", "gpu-good", CT0 + 310))
    ingest(0, {"type": "DELETED", "object": x})
    found = [c.decision for c in out if isinstance(c, Candidate)]
    assert [(d.action, d.target, d.at) for d in found] == [("delete-pod", "x", CT0 + 300)]


def test_a_pod_deleted_after_its_budget_lapsed_is_judged_by_its_partition_first() -> None:
    """As serve (tests/runtime/test_cluster_time.py): pod X's own graceful deletion, asked a
    second after its budget lapsed, is the only stamp that says the time had come; it moves
    the ingest's clock and X's partition's, and X is judged at its budget's end before it
    goes. Asked a second before, it is not judged."""
    for asked, want in ((CT0 + 301, [("delete-pod", "x", CT0 + 300)]), (CT0 + 299, [])):
        cluster = ClusterTime(VirtualClock(0.0))  # the ingest's, standing still: stamps only
        core = PartitionCore(load_policy(CLOCK_POLICY), 0, 1)
        x = on_node("x", "gpu-good", CT0)
        gone = orjson.loads(orjson.dumps(x))
        gone["metadata"]["deletionTimestamp"] = iso(asked + 30)
        gone["metadata"]["deletionGracePeriodSeconds"] = 30
        out: list[Candidate | Learned] = []
        for doc in (x, {"type": "MODIFIED", "object": gone}):
            records = split(orjson.dumps(doc))
            at = arrived(records, cluster)
            for record in records:
                out.extend(core.feed(record.value, at))
        found = [c.decision for c in out if isinstance(c, Candidate)]
        assert [(d.action, d.target, d.at) for d in found] == want, asked


def test_waiting_candidates_are_a_row_each_and_go_when_released() -> None:
    """A table kept as the worker keeps it (None: the row deleted). The waiting
    candidates were one row, written whole by every batch; now one row each."""
    table: dict[str, object] = {}

    def write(guard: GuardCore) -> None:
        for row, value in guard.changed().items():
            if value is None:
                table.pop(row, None)
            else:
                table[row] = value

    guard = GuardCore(PolicyFile(), partitions=2)
    for i in range(3):
        guard.take(Candidate(stuck(f"pod-{i}", f"inc-{i}", 40.0 + i), 40.0 + i, i % 2))
    write(guard)
    assert sorted(k for k in table if k.startswith("pending")) == [
        "pending|1", "pending|2", "pending|3"
    ]  # fmt: skip
    restored = GuardCore.from_rows(PolicyFile(), 2, dict(table))
    restored.take(Candidate(stuck("pod-9", "inc-9", 41.0), 41.0, 0))  # a tie: after pod-1
    restored.take(Watermark(0, 60.0))
    out = restored.take(Watermark(1, 60.0))
    write(restored)
    assert not [k for k in table if k.startswith("pending")], "released: their rows go"
    order = [r.result.decision.target if isinstance(r.result, Suppressed) else r.result.target
             for r in out if r.result is not None]  # fmt: skip
    assert order == ["pod-0", "pod-1", "pod-9", "pod-2"]


def test_an_older_workers_pending_row_is_read_and_rewritten_per_candidate() -> None:
    entry = [40.0, 1, 7, encode(Candidate(stuck("pod-a", "inc-a", 40.0), 40.0, 0)).decode()]
    guard = GuardCore.from_rows(PolicyFile(), 1, {"pending": [entry]})
    assert guard.changed() == {"pending": None, "pending|7": entry}
    out = guard.take(Watermark(0, 60.0))
    assert [r.result.target for r in out if isinstance(r.result, Decision)] == ["pod-a"]


def test_marks_and_learned_are_a_row_per_batch_and_per_model() -> None:
    """The clock and every watermark are one row, written once per batch that moved
    any; a model's learned cold starts are one row (its phases), not one per phase."""
    guard = GuardCore(PolicyFile(), partitions=2)
    guard.changed()
    samples = (("m", "image_pull", 10.0), ("m", "engine_init", 90.0), ("n", "image_pull", 5.0))
    guard.take(Learned(30.0, 1, samples))
    guard.take(Watermark(0, 40.0))
    rows = guard.changed()
    assert rows.pop("pending|1") is not None, "waiting for partition 1's watermark"
    assert rows == {"marks": {"clock": None, "watermarks": {"0": 40.0}, "taken": -1, "from": 0}}
    guard.take(Watermark(1, 40.0))
    rows = guard.changed()
    assert rows == {
        "pending|1": None,
        "marks": {"clock": None, "watermarks": {"0": 40.0, "1": 40.0}, "taken": -1, "from": 0},
        "learned|m": {"image_pull": [10.0], "engine_init": [90.0]},
        "learned|n": {"image_pull": [5.0]},
    }
    restored = GuardCore.from_rows(PolicyFile(), 2, rows)
    assert restored.watermarks == {0: 40.0, 1: 40.0} and restored.learned == guard.learned
    assert restored.changed() == {}


def test_an_older_workers_rows_per_watermark_and_phase_are_read_and_rewritten() -> None:
    older = {"clock": 35.0, "watermark|0": 40.0, "watermark|1": 38.0,
             "learned|m\nimage_pull": [10.0, 12.0], "learned|m\nengine_init": [90.0]}  # fmt: skip
    guard = GuardCore.from_rows(PolicyFile(), 2, older)
    assert guard.clock == 35.0 and guard.frontier == 38.0
    assert guard.learned == {"m\nimage_pull": [10.0, 12.0], "m\nengine_init": [90.0]}
    assert guard.changed() == {
        "clock": None, "watermark|0": None, "watermark|1": None,
        "learned|m\nimage_pull": None, "learned|m\nengine_init": None,
        "marks": {"clock": 35.0, "watermarks": {"0": 40.0, "1": 38.0}, "taken": -1, "from": 0},
        "learned|m": {"image_pull": [10.0, 12.0], "engine_init": [90.0]},
    }  # fmt: skip


@pytest.mark.parametrize("restored", [False, True])
def test_a_pod_held_until_old_enough_goes_when_the_clusters_estimate_drops(restored) -> None:
    """Issue 20's open min_age item, on Kafka: the hung pod and the siblings whose cold
    starts bring the estimate down are in other partitions; the guard hears of them in
    time order and sends the pod's partition a look sooner, at the instant one process
    does. `restored`: the guard's worker is replaced while the pod is held (its rows read
    back): the hold it was looking out for is in them."""
    policy = load_policy(estimate.POLICY)
    run = make_run(estimate.POLICY)
    fast = [920.0, 930.0, 940.0, 950.0, 960.0]
    estimate.fleet(run.feed, run.at, fast)
    expected = [(d.action, d.target, d.at, d.reason) for d in run.decisions]
    assert ("delete-pod", estimate.HUNG["name"], T0 + 1190) in [x[:3] for x in expected]

    cluster = Cluster(policy)
    held = cluster.guard

    def at(now: float) -> None:
        cluster.tick(now)
        if restored and now == T0 + 1120 and cluster.guard is held:
            assert cluster.guard.guard.aging, "the hold is looked out for"
            cluster.guard = GuardCore.from_json(policy, N, cluster.guard.to_json())

    estimate.fleet(lambda doc: cluster.publish(orjson.dumps(doc)), at, fast)
    assert (cluster.guard is not held) == restored, "the worker was replaced mid-hold"
    partitions = {
        cluster.partitioner(name.encode(), list(range(N)), list(range(N)))
        for name in (f"llm/{estimate.HUNG['name']}", "llm/vllm-70b-7c9d5b6f4-s009")
    }
    assert len(partitions) == 2, "the hung pod and the last sibling are partitions apart"
    assert [(d.action, d.target, d.at, d.reason) for d in cluster.decided] == expected


def test_a_nodes_verdict_reaches_its_pods_in_every_partition_and_is_told_once() -> None:
    """Issue 20's unsettled nodes, on Kafka: the verdict goes to every partition (a node's
    pods are in any of them), each pod's deletion is the node's there as in one process,
    and what to tell about the node is said once (its owner partition's)."""
    policy = load_policy("")
    run = make_run("")
    cluster = Cluster(policy)
    docs = [pod(name, uid, created=0, scheduled=1, started=10, node=unsettled.BAD)
            for name, uid in unsettled.PODS]  # fmt: skip
    for doc in docs:
        run.feed(doc)
        cluster.publish(orjson.dumps(doc))
    for at in (100, 400, 700, 900):
        run.at(T0 + at)
        cluster.tick(T0 + at)
        if at == 100:
            run.feed(unsettled.verdict(False, 100))
            cluster.publish(orjson.dumps(unsettled.verdict(False, 100)))
    everyone = list(range(N))
    apart = {cluster.partitioner(f"llm/{name}".encode(), everyone, everyone)
             for name, _ in unsettled.PODS}  # fmt: skip
    assert len(apart) == 2, "the two pods are partitions apart"

    def seen(d: Decision) -> tuple[object, ...]:
        return d.action, d.target, d.unsettled_node, d.reason, d.told_under

    assert sorted(map(seen, cluster.decided)) == sorted(map(seen, run.decisions))
    assert [d.action for d in run.decisions].count("notify") == 1
    # Each deletion's row goes where the node's message is, to be told in its thread.
    assert {command_key(d) for d in cluster.decided} == {
        next(d.incident for d in cluster.decided if d.action == "notify").encode()
    }
    assert [d.unsettled_node for d in run.decisions if d.action == "delete-pod"] == [
        unsettled.BAD,
        unsettled.BAD,
    ]


def test_a_timer_due_before_a_broadcast_input_another_partition_owns_is_kept() -> None:
    """A Deployment's document goes to every partition; one decides for it, the others drop
    what it decides. The timers that fire on the way to its time are the partition's own
    pods': pod X's budget lapsed before the document came, and X's deletion is decided
    (it was dropped with the document's own decisions, and X never judged again)."""
    doc = deployment("vllm/vllm-openai:v0.6.3", at=CT0)
    (item,) = decode_input(orjson.dumps(doc))
    key = owner_key(item)
    assert key is not None
    mine = 1 - owner(key, 2)  # the partition X is in decides nothing for the Deployment
    core = PartitionCore(load_policy(CLOCK_POLICY), mine, 2)
    out = list(core.feed(orjson.dumps(on_node("x", "gpu-good", CT0)), CT0))
    out += core.feed(orjson.dumps(doc), CT0 + 310)  # the cluster's time moved on meanwhile
    found = [c.decision for c in out if isinstance(c, Candidate)]
    assert [(d.action, d.target, d.at) for d in found] == [("delete-pod", "x", CT0 + 300)]


def test_a_newer_releases_guard_records_are_kept_in_the_state_row() -> None:
    """After a rollback of the workers: the guard's state row holds a record of a guardrail
    this release does not have. It is restored (no refusal), kept unused, and the state row
    written again holds it unchanged beside what this release recorded."""
    newer = {"nodes": [["gpu-node-3", 1.0]]}
    rows: dict[str, object] = {"state": json.dumps({"version": 1, "node_quiet": newer})}
    guard = GuardCore.from_rows(PolicyFile(), 1, rows)
    assert guard.guard.state.foreign == ("node_quiet",)
    out = guard.take(Candidate(stuck("pod-a", "inc-a", 40.0), 40.0, 0))
    out += guard.take(Watermark(0, 60.0))
    assert [r.result.target for r in out if isinstance(r.result, Decision)] == ["pod-a"]
    state = json.loads(str(guard.changed()["state"]))
    assert state["node_quiet"] == newer and "idempotency" in state


def test_a_pod_another_partition_saw_ready_heals_a_deletion_for_the_guard() -> None:
    """blast_radius stops counting a deletion once a pod of its workload created after it
    is Ready (tests/policy/test_ready_heals.py, one process). Here the three pods are in
    three partitions: the guard hears each Ready pod with the cold starts learned
    (`Learned`), and weighs every decision by the cluster's (`ClusterHistory.weigh`)."""
    from tests.policy import test_ready_heals as heals

    cluster = Cluster(load_policy(heals.POLICY))
    cluster.publish(orjson.dumps(deployment("vllm/vllm-openai:v0.6.3", watch="ADDED", ready=0)))
    cluster.run(0, orjson.dumps(pod(heals.A, heals.UID_A, watch="ADDED", created=0,
                                    scheduled=1, started=10)))  # fmt: skip
    cluster.run(1, orjson.dumps(pod(heals.B, heals.UID_B, watch="ADDED", created=5,
                                    scheduled=6, started=15)))  # fmt: skip
    at = 10.0
    while not cluster.decided:
        at += 10
        cluster.tick(T0 + at)
    (first,) = cluster.decided
    assert first.target == heals.A
    deleted = first.at - T0
    cluster.run(0, orjson.dumps(pod(heals.A, heals.UID_A, watch="DELETED", created=0,
                                    scheduled=1, started=10)))  # fmt: skip
    created = deleted + 2
    c = dict(created=created, scheduled=created + 1, started=created + 3)
    cluster.run(2, orjson.dumps(pod(heals.C, heals.UID_C, watch="ADDED", **c)))
    while at < created + 40:
        at += 10
        cluster.tick(T0 + at)
    cluster.run(2, orjson.dumps(pod(heals.C, heals.UID_C, ready=created + 40, **c)))
    while at < deleted + 700:
        at += 10
        cluster.tick(T0 + at)
    second = [d for d in cluster.decided if d.target == heals.B]
    assert [d.action for d in second] == ["delete-pod"]
    assert second[0].ready_created == (T0 + created,)
    assert second[0].at - T0 < created + 40 + 60  # not when A's deletion left the window


def test_the_guard_weighs_a_decision_by_every_partition_s_ready_pods() -> None:
    """Before another partition's Ready pod is relayed to the decider, the guard has heard
    it: the decision is weighed by the cluster's, as one process would decide."""
    from remediator.core.guard import ClusterHistory
    from remediator.policy.workloads import READY_CREATED

    history = ClusterHistory(load_policy(RELAXED).rules)
    history.learn([("llm/Deployment/vllm-70b", READY_CREATED, T0 + 50.0),
                   ("llm/Deployment/other", READY_CREATED, T0 + 60.0)])  # fmt: skip
    d = Decision("delete-pod", "llm", "vllm-70b-x", "stuck", "inc", T0 + 100, uid="u",
                 workload="llm/Deployment/vllm-70b", expected_cold_start_s=300.0)  # fmt: skip
    weighed = history.weigh(Candidate(d, T0 + 100)).decision
    assert weighed.ready_created == (T0 + 50.0,)
    told = Decision("notify", "llm", "vllm-70b-x", "slow", "inc-2", T0 + 100)
    assert history.weigh(Candidate(told, T0 + 100)).decision == told  # nothing to weigh
