"""The learned history as the shared ConfigMap holds it (runtime/shared_state.py): what is
written reads back the same, a document too big for a ConfigMap keeps its newest histories,
and whatever the ConfigMap holds (edited by hand, truncated) reads without an exception:
what does not read is said and left out. The ConfigMap itself, its RBAC and two serves
sharing it run on the real control plane (tests/live/test_shared_state.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from remediator.contract.decision import Decision
from remediator.runtime.outbox import Outbox, decision_from_json, decision_to_json
from remediator.runtime.shared_state import (
    decode,
    decode_through,
    encode,
    encode_through,
    remembered,
)

names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
samples = st.lists(st.tuples(names, st.sampled_from(["total", "engine_init", "step:weights"]),
                             seconds), max_size=60)  # fmt: skip


def _grouped(items: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """As a history holds them: each (model, phase) together, in the order first learned."""
    rows: dict[tuple[str, str], list[float]] = {}
    for model, phase, value in items:
        rows.setdefault((model, phase), []).append(value)
    return [(m, p, v) for (m, p), values in rows.items() for v in values]


@given(samples)
def test_what_is_written_reads_back(items: list[tuple[str, str, float]]) -> None:
    text, left = encode(list(items))
    assert left == 0
    assert decode(text) == (_grouped(items), [])


@given(samples, st.integers(min_value=20, max_value=2000))
def test_too_big_a_history_keeps_its_newest_and_fits(
    items: list[tuple[str, str, float]], max_bytes: int
) -> None:
    text, left = encode(list(items), max_bytes)
    kept, bad = decode(text)
    assert bad == []
    assert len(text.encode()) <= max_bytes or kept == []
    whole = _grouped(items)
    keys = list(dict.fromkeys((m, p) for m, p, _ in whole))
    assert len(keys) - left == len(dict.fromkeys((m, p) for m, p, _ in kept))
    assert kept == whole[len(whole) - len(kept) :]  # the least recently learned went first


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(json_values)
def test_whatever_the_configmap_holds_reads_without_an_exception(doc: Any) -> None:
    for text in (json.dumps(doc), json.dumps({"learned": doc}), json.dumps(doc)[:-1]):
        kept, bad = decode(text)
        assert all(isinstance(m, str) and isinstance(p, str) and v >= 0 for m, p, v in kept)
        assert kept or bad or text == '{"learned": []}'


def test_a_bad_row_is_said_and_the_good_ones_kept() -> None:
    text = json.dumps({"learned": [
        ["m", "total", [30, 31.5]],
        ["m", "", [1]],
        ["m", "engine_init", [-1]],
        ["m", "engine_init", [True]],
        "not a row",
        ["n", "total", [40]],
    ]})  # fmt: skip
    kept, bad = decode(text)
    assert kept == [("m", "total", 30.0), ("m", "total", 31.5), ("n", "total", 40.0)]
    assert [b.split(": ", 1)[0] for b in bad] == [
        "learned.json row 1", "learned.json row 2", "learned.json row 3", "learned.json row 4",
    ]  # fmt: skip
    assert decode("{")[1][0].startswith("learned.json: not JSON")
    assert decode("[]") == ([], ['learned.json: expected {"learned": [...]}'])


# ---- what got through: the kill-loop memory ------------------------------------------------
def _deleted(
    pod: str, at: float, workload: str = "llm/Deployment/vllm", phase: str = "engine_init"
):  # type: ignore[no-untyped-def]
    return Decision("delete-pod", "llm", pod, "slow", f"inc-{pod}", at, uid=f"uid-{pod}",
                    workload=workload, phase=phase)  # fmt: skip


def test_what_a_decider_remembers_is_kept_the_last_deletion_per_workload_and_phase() -> None:
    first, second = _deleted("a", 10.0), _deleted("b", 20.0)
    other = _deleted("c", 15.0, workload="llm/Deployment/other")
    pull = _deleted("d", 5.0, phase="image_pull")
    told = Decision("notify", "llm", "vllm", "too tight", "too-tight-1", 12.0)
    no_phase = Decision(
        "delete-pod", "llm", "e", "why", "inc-e", 13.0, workload="llm/Deployment/vllm"
    )
    kept = remembered([second, told, first, other, pull, no_phase, told])
    assert kept == [pull, told, other, second]  # oldest first; nothing a decider forgets


deletions = st.builds(_deleted, st.sampled_from("abcdef"), st.floats(0, 1e6),
                      st.sampled_from(["llm/Deployment/x", "llm/Deployment/y"]),
                      st.sampled_from(["engine_init", "container_start"]))  # fmt: skip


@given(st.lists(deletions, max_size=30))
def test_what_got_through_reads_back_and_remembers_whatever_the_order(
    items: list[Decision],
) -> None:
    kept = remembered(items)
    assert decode_through(encode_through(kept)) == (kept, None)
    assert remembered(list(reversed(items))) == kept or len({d.at for d in items}) < len(items)
    assert len({(d.workload, d.phase) for d in kept}) == len(kept)


def test_what_got_through_that_does_not_read_is_left_out_whole() -> None:
    taken, why = decode_through('[{"action": "delete-pod"}]')
    assert taken == [] and why is not None and why.startswith("through.json: ")


def test_an_outbox_row_an_older_release_wrote_still_reads(tmp_path: Path) -> None:
    """A hedge row written before its cost moved to the guard state names fields since gone."""
    outbox = Outbox(str(tmp_path / "state.db"), lambda: 0.0)
    d = Decision("hedge-pod", "llm", "vllm-1", "stalled", "hedge-1", 1.0, uid="u1", gpus=2)
    doc = json.loads(decision_to_json(d)) | {"cold_start_gpu_s": 12.0, "clocked_since": 0.0}
    outbox._db.execute(
        "INSERT INTO outbox (incident, action, decision, state, created_at, updated_at)"
        " VALUES ('hedge-1', 'hedge-pod', ?, 'ended', 0, 0)",
        (json.dumps(doc),),
    )
    assert [r.decision for r in outbox.rows()] == [d]


def test_a_decision_with_every_fact_reads_back_the_same_from_the_outbox_and_the_state() -> None:
    """Tuples stay tuples (a decision is compared and hashed as a whole, e.g. by dedup)."""
    d = Decision("delete-pod", "llm", "vllm-1", "stalled", "inc-1", 1.0, uid="u1",
                 workload="llm/Deployment/vllm", params=(("timeout", "60"),),
                 pod_created_at=0.5, expected_cold_start_s=40.0, replicas=2,
                 phase="engine_init", stalled="weights", gpus=2, unsettled_node="n1",
                 told_under="inc-0", ready_created=(0.25, 0.75))  # fmt: skip
    assert decision_from_json(decision_to_json(d)) == d
    assert decode_through(encode_through([d])) == ([d], None)
