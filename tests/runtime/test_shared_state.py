"""The learned history as the shared ConfigMap holds it (runtime/shared_state.py): what is
written reads back the same, a document too big for a ConfigMap keeps its newest histories,
and whatever the ConfigMap holds (edited by hand, truncated) reads without an exception:
what does not read is said and left out. The ConfigMap itself, its RBAC and two serves
sharing it run on the real control plane (tests/live/test_shared_state.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from remediator.runtime.shared_state import decode, encode

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
