"""Folding a partition's learned history in the `pods` table (`PartitionRows.fold`): the
cold starts learned from pods since pruned (`L` rows) and those relayed from other
partitions (`LEARNED_KEY`) would otherwise grow with every cold start the cluster ever
made. A fold keeps, of what was learned before the oldest pod record left, the last
`window` samples of each model's phase, and of the deletions that got through only the last
of each workload's phase (the kill-loop memory), and of a workload's documents its last: a
rebuild then judges every pod record by the history, memory and workloads it was judged by
before the fold, and ends with the same.

Over a dict as the table (the worker's is a Faust table), against the rows' own replay:
no core, so that the property speaks of the rows alone; then a real core, rebuilt."""

from __future__ import annotations

from collections import deque
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.codec import decode
from remediator.contract.decision import Decision
from remediator.contract.records import Feedback, GotThrough
from remediator.core.decider import Decider
from remediator.inputs.decode import decode as decode_input
from remediator.policy_file import PolicyFile
from remediator.streams.core import (
    FEEDBACK_KEY,
    Learned,
    feedback_batch,
    judged_key,
    learned_samples,
    thin_broadcast,
    thin_feedback,
    tick_record,
)
from remediator.streams.keys import BROADCAST
from remediator.streams.pods import FOLDED, LEARNED_KEY, ROW_BYTES, Entry, PartitionRows
from tests.policy.builders import T0, deployment
from tests.streams.test_pods import P, Partition, life, rebuilt

WINDOW = 3
FEEDBACKS = '{"remediator":"feedback","records":'
THIN = {FEEDBACK_KEY: thin_feedback, BROADCAST: thin_broadcast}
MODELS = ("llama", "qwen")
PHASES = ("total", "image_pull")

sample = st.tuples(st.sampled_from(MODELS), st.sampled_from(PHASES), st.integers(1, 99))
# What got through: a pod deletion in a workload's phase (or with no phase), or a notice.
through = st.tuples(
    st.sampled_from(["delete-pod", "delete-pod", "notify"]),
    st.sampled_from(["ns/Deployment/a", "ns/Deployment/b", None]),
    st.sampled_from(["engine_init", "image_pull", None]),
    st.integers(0, 9),
)
op = st.one_of(
    st.tuples(st.just("pod"), st.integers(0, 5), st.lists(sample, max_size=3)),
    st.tuples(st.just("relayed"), st.lists(sample, min_size=1, max_size=3)),
    st.tuples(st.just("other"), st.just("node/gpu-1")),
    st.tuples(
        st.just("workload"),
        st.sampled_from(["a", "b"]),
        st.integers(1, 3),
        st.sampled_from(["MODIFIED", "MODIFIED", "DELETED"]),
    ),  # fmt: skip
    st.tuples(st.just("through"), st.lists(through, min_size=1, max_size=3)),
    st.tuples(st.just("end"), st.sets(st.integers(0, 5))),
    st.tuples(st.just("fold")),
)


def _teaching(raw: str) -> list[tuple[str, str, float]]:
    """What a record teaches, as a rebuild feeds it: a pod document here says it outright."""
    if raw.startswith('{"teach"'):
        return [(m, ph, float(s)) for m, ph, s in orjson.loads(raw)["teach"]]
    return []


def got_through(spec: tuple[str, str | None, str | None, int], at: float) -> GotThrough:
    action, workload, phase, n = spec
    decision = Decision(action, "ns", f"pod-{n}", "why", f"{action}-{n}", at, uid=f"uid-{n}",
                        workload=workload, phase=phase)  # type: ignore[arg-type]  # fmt: skip
    return GotThrough(decision, at, False, P + 1, phase)


def judged_history(entries: list[Entry]) -> tuple[list[Any], Any]:
    """Feed the entries as a rebuild does: the history and the kill-loop memory each judged
    record met, and both at the end. The memory is a real decider's, fed what got
    through (its private state read: what a pod judged next would meet)."""
    history: dict[tuple[str, str], deque[float]] = {}
    met: list[Any] = []
    decider = Decider(PolicyFile())

    def memory() -> Any:
        engine = decider.engine
        return (dict(engine._deleted), set(engine._told), dict(engine._done_work),
                dict(engine.workloads))  # fmt: skip

    def learn(samples: Any) -> None:
        for m, ph, s in samples:
            history.setdefault((m, ph), deque(maxlen=WINDOW)).append(s)

    for e in entries:
        if e.samples:
            learn(e.samples)
        elif e.key == LEARNED_KEY:
            learn(learned_samples(e.raw))
        elif e.key == BROADCAST:
            for item in decode_input(e.raw.encode()):
                decider.engine.on_input(item, None, float(e.offset))
        elif e.key == FEEDBACK_KEY:
            for record in decode(e.raw.encode()[len(FEEDBACKS) : -1], list[Feedback | Learned]):
                assert isinstance(record, GotThrough)
                decider.feedback(record)
        else:
            if judged_key(e.key):
                learned = {k: list(v) for k, v in history.items()}
                met.append((e.offset, e.key, e.raw, learned, memory()))
            learn(_teaching(e.raw))
    return met, ({k: list(v) for k, v in history.items()}, memory())


def run(ops: list[tuple[Any, ...]], table: dict[str, Any], fold: bool) -> PartitionRows:
    rows = PartitionRows(table, P)
    for offset, o in enumerate(ops, 1):
        if o[0] == "pod":
            key, teach = f"ns/pod-{o[1]}", [[m, ph, s] for m, ph, s in o[2]]
            raw = orjson.dumps({"teach": teach, "at": offset}).decode()
            rows.add(offset, raw, key)
            rows.taught(key, offset, [(m, ph, float(s)) for m, ph, s in teach])
        elif o[0] == "relayed":
            learned = Learned(float(offset), P + 1, tuple((m, ph, float(s)) for m, ph, s in o[1]))
            rows.add(offset, feedback_batch([learned]).decode(), LEARNED_KEY, None, 1)
        elif o[0] == "through":
            records = [got_through(spec, float(offset)) for spec in o[1]]
            rows.add(offset, feedback_batch(records).decode(), FEEDBACK_KEY, None, 1)
        elif o[0] == "workload":  # a Deployment's document (its status moves with its pods)
            doc = deployment(f"vllm/vllm-openai:v0.{o[2]}", watch=o[3], ready=offset)
            doc["object"]["metadata"]["name"] = f"vllm-{o[1]}"  # (a fresh document: ours)
            rows.add(offset, orjson.dumps(doc).decode(), BROADCAST)
        elif o[0] == "other":
            rows.add(offset, orjson.dumps({"other": offset}).decode(), o[1])
        elif o[0] == "end":
            rows.flush()
            rows.prune([f"ns/pod-{i}" for i in o[1]], offset)
        elif fold:  # (a fold)
            rows.flush()
            rows.fold(WINDOW, learned_samples, judged_key, THIN)
    rows.flush()
    return rows


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=60))
def test_a_fold_leaves_every_judged_record_the_history_it_met(ops: list[Any]) -> None:
    unfolded: dict[str, Any] = {}
    run(ops, unfolded, fold=False)
    folded: dict[str, Any] = {}
    rows = run(ops, folded, fold=True)
    before = judged_history(PartitionRows(dict(unfolded), P).replay())
    assert judged_history(PartitionRows(dict(folded), P).replay()) == before

    # Folded again at the end; and a worker killed in the middle of that fold: after its
    # parts, before the row that names them (the fold before stands), or after that row,
    # before the rows it folded were written again. Rebuilt from any, the same.
    pre = dict(folded)
    rows.fold(WINDOW, learned_samples, judged_key, THIN)
    assert judged_history(PartitionRows(dict(folded), P).replay()) == before
    head = f"{P}|{FOLDED}"
    fold_rows = {k: v for k, v in folded.items() if k.startswith(head)}
    parts_only = {**pre, **{k: v for k, v in fold_rows.items() if k != head}}
    assert judged_history(PartitionRows(parts_only, P).replay()) == before
    assert judged_history(PartitionRows({**pre, **fold_rows}, P).replay()) == before


def test_a_big_fold_is_cut_into_rows_under_the_message_size() -> None:
    """Many models' histories fold to more than one changelog record may hold: in parts."""
    table: dict[str, Any] = {}
    models = [f"org/model-{m:03d}-{'x' * 40}" for m in range(1000)]
    ops: list[Any] = [("relayed", [(m, ph, s) for ph in PHASES for s in range(3)]) for m in models]
    rows = run(ops, table, fold=False)
    rows.fold(WINDOW, learned_samples, judged_key, THIN)
    parts = [v for k, v in table.items() if k.startswith(f"{P}|{FOLDED}.")]
    assert len(parts) > 1 and all(len(orjson.dumps(p)) <= ROW_BYTES for p in parts)
    assert len(rows.folded()[1]) == len(models) * len(PHASES) * 3
    again = PartitionRows(dict(table), P).replay()
    assert [e.samples for e in again] == [((m, ph, float(s)),) for m in models
                                          for ph in PHASES for s in range(3)]  # fmt: skip


def test_the_rows_stay_bounded_while_no_pod_is_judged_by_them() -> None:
    table: dict[str, Any] = {}
    ops: list[Any] = []
    for i in range(400):
        ops += [("pod", i % 3, [("llama", "total", i)]), ("relayed", [("qwen", "total", i)])]
        ops += [("workload", "ab"[i % 2], 1 + i % 3, "MODIFIED")]
        ops += [("end", {(i + 1) % 3}), ("fold",)]
    run(ops, table, fold=True)
    samples = PartitionRows(table, P).folded()[1]
    assert 0 < len(samples) <= WINDOW * 2, "the last window of each model's phase, no more"
    relayed_left = [e for row in table.values() if isinstance(row, list) for e in row
                    if isinstance(e, list) and len(e) > 2 and e[2] == LEARNED_KEY]  # fmt: skip
    assert len(relayed_left) <= 2, "only those at or after the oldest live pod's record"
    workloads = [e for row in table.values() if isinstance(row, list) for e in row
                 if isinstance(e, list) and len(e) > 2 and e[2] == BROADCAST]  # fmt: skip
    assert len(workloads) <= 4, "each workload's last document, and those after the oldest pod"


def test_a_core_rebuilt_from_a_folded_table_knows_what_the_live_one_knows() -> None:
    """A real core: pods finish cold starts and are forgotten, other partitions' cold starts
    come in relayed, and deletions got through; folded with the policy's window, a rebuild
    learns the same history and remembers the same last deletion of each workload."""
    table: dict[str, Any] = {}
    live = Partition(table)
    window = PolicyFile().rules.stuck_pod.adaptive.window
    for n in range(window + 20):
        start = 400.0 * n
        name = f"vllm-70b-7c9d5b6f4-p{n:03d}"
        for doc in life(name, f"uid-{n}", start, deleted=True):
            live.take(orjson.dumps(doc), f"llm/{name}")
        relayed = Learned(T0 + start, P + 1, (("meta-llama/Llama-3.1-70B", "total", 100.0 + n),))
        deleted = got_through(("delete-pod", f"llm/Deployment/w{n % 2}", "engine_init", n),
                              T0 + start)  # fmt: skip
        for key, value in ((LEARNED_KEY, feedback_batch([relayed])),
                           (FEEDBACK_KEY, feedback_batch([deleted]))):  # fmt: skip
            live.core.feed(value)
            live.rows.add(live.offset - 1, value.decode(), key, None, 1 + (key == FEEDBACK_KEY))
        live.take(tick_record(T0 + start + 399.0), "\x00tick")
        live.end_batch()
        live.rows.fold(window, learned_samples, judged_key, THIN)
    assert live.history(), "the stream must finish cold starts"
    folded = PartitionRows(table, P).folded()[1]
    kinds = {(m, ph) for _, m, ph, _ in folded}
    assert len(folded) <= window * len(kinds) < (window + 20) * len(kinds)
    again = rebuilt(table)
    assert again.history() == live.history()
    memory = live.core.decider.engine._deleted  # the kill-loop memory: the last of each
    assert len(memory) == 2 and again.core.decider.engine._deleted == memory
    kept = [e for row in table.values() if isinstance(row, list) for e in row
            if isinstance(e, list) and len(e) > 2 and e[2] == FEEDBACK_KEY]  # fmt: skip
    assert len(kept) <= 4, "what got through, thinned to what a rebuild still needs"
