"""One codec for every record that crosses a process: msgspec JSON.

Decisions, suppressions, candidates, feedback, watermarks and the runtime's commands
(`executors.protocol`: `Submit`, `Poll`, `Tell` with any of its notes, tagged structs, so
`decode(data, Command)` reads any of them) are written with `encode` and read back with
`decode(data, Type)`; the boundary's tagged records also as one union (`decode_wire`).
A record that does not match its type is a `msgspec.ValidationError` that says which
field: a bad record is refused whole, never half read.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from remediator.contract.records import (
    Admitted,
    Candidate,
    GotThrough,
    HeldBehind,
    Learned,
    RetryAt,
    Settled,
    Watermark,
)

T = TypeVar("T")

Wire = Candidate | GotThrough | RetryAt | HeldBehind | Learned | Watermark | Admitted | Settled

_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}

DecodeError = msgspec.DecodeError


def encode(record: object) -> bytes:
    return _encoder.encode(record)


def decode(data: bytes | str, kind: type[T]) -> T:
    found = _decoders.get(kind)
    if found is None:
        found = _decoders[kind] = msgspec.json.Decoder(kind)
    result: T = found.decode(data)
    return result


_wire: msgspec.json.Decoder[Wire] = msgspec.json.Decoder(Wire)


def decode_wire(data: bytes | str) -> Wire:
    """Any of the boundary's tagged records."""
    return _wire.decode(data)
