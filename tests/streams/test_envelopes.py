"""The ingest's envelope (`contract.records.Envelope`, written by `contract.codec`): any
JSON document the ingest takes comes out of it as it went in, with its key and time, in
order; anything else is refused as bad input, never half read."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.contract.records import Packed
from remediator.inputs.records import InputError
from remediator.streams.core import ENVELOPE, envelope, unpack

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip
documents = st.tuples(
    st.text(),
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
    json_values,
    st.sampled_from([b"", b"\n", b" \r\n"]),  # what a body may end with
)


@given(st.lists(documents, max_size=8))
def test_every_document_comes_out_as_it_went_in(docs: list[tuple[Any, ...]]) -> None:
    packed = [Packed(k, at, msgspec.Raw(orjson.dumps(v) + tail)) for k, at, v, tail in docs]
    raw = envelope(packed)
    assert raw.startswith(ENVELOPE)
    out = unpack(raw)
    assert [(d.key, d.at, orjson.loads(bytes(d.raw))) for d in out] == [
        (k, at, v) for k, at, v, _ in docs
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"remediator":"inputs","records":[["llm/a",1.0,{"kind":"Pod"]]}',  # cut short
        b'{"remediator":"inputs","records":[["llm/a","soon",{}]]}',  # a time that is not
        b'{"remediator":"inputs","records":{}}',
        b'{"remediator":"inputs"',
    ],
)
def test_a_bad_envelope_is_refused_whole(raw: bytes) -> None:
    with pytest.raises(InputError):
        unpack(raw)
