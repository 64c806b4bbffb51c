"""The hedge step's annotations (inputs/hedge_annotation.py): the hedges running on a
Deployment, one entry each, and the pods whose hedge ended; one format for the step that writes
them and the core that reads them off the watch."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.inputs.hedge_annotation import (
    HEDGED_KEPT,
    Hedge,
    read_hedged,
    read_hedges,
    write_hedged,
    write_hedges,
)

uids = st.uuids().map(str)
hedge = st.builds(
    Hedge,
    pod=st.text("abcdefghij-0123456789", min_size=1, max_size=20),
    uid=uids,
    replicas=st.integers(0, 1000),
    before=st.lists(uids, max_size=5).map(tuple),
    deadline=st.floats(0, 4.1e9, allow_nan=False),
    racing=st.none() | uids,
    racing_since=st.none() | st.floats(0, 4.1e9, allow_nan=False),
)


@given(st.lists(hedge, max_size=6, unique_by=lambda h: h.uid).map(tuple))
def test_what_the_step_writes_reads_back_the_same(hedges: tuple[Hedge, ...]) -> None:
    text = write_hedges(hedges)
    assert (text is None) == (not hedges)  # none running: the annotation goes
    assert read_hedges(text or "[]") == hedges


def test_a_release_before_wrote_one_hedge_as_an_object() -> None:
    one = Hedge("p", "u", 2, ("a", "u"), 1.8e9, "n")
    assert read_hedges(one.to_json()) == (one,)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("not json", "not JSON"),
        ("[1]", "not a hedge the step wrote"),
        ('[{"pod": "p"}]', "not a hedge the step wrote"),
        ('{"pod": "p", "uid": "u", "replicas": "x", "before": [], "deadline": 1}', "not a hedge"),
        (
            '{"pod": "p", "uid": "u", "replicas": 1, "before": [], "deadline": 1, '
            '"racing": "n", "racing_since": "soon"}',
            "not a hedge",
        ),
        (
            json.dumps([{"pod": "p", "uid": "u", "replicas": 1, "before": [], "deadline": 1}] * 2),
            "names a pod twice",
        ),
    ],
)
def test_anything_else_is_refused_with_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        read_hedges(text)


def test_the_pods_hedged_keep_the_newest_each_once() -> None:
    assert read_hedged(None) == () and read_hedged("") == ()
    assert read_hedged("u1") == ("u1",)  # (one uid: a release before)
    text = write_hedged("u1,u2", "u1")
    assert read_hedged(text) == ("u2", "u1")
    for i in range(HEDGED_KEPT + 5):
        text = write_hedged(text, f"x{i}")
    kept = read_hedged(text)
    assert len(kept) == HEDGED_KEPT and kept[-1] == f"x{HEDGED_KEPT + 4}"
    assert "u1" not in kept and "u2" not in kept
