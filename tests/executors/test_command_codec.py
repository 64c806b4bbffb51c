"""Commands cross a process through the one codec (`contract.codec`), as candidates and
feedback do: a `Tell` with any of its notes comes back equal, as a `Tell` or as a
`Command`; a bad one is refused whole."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.contract.codec import decode, encode
from remediator.contract.decision import Decision
from remediator.executors.protocol import (
    Acted,
    Command,
    CouldNot,
    Ended,
    Finished,
    NotStarted,
    Poll,
    Spared,
    Submit,
    Submitted,
    Tell,
    WouldHave,
)

DECISION = Decision("delete-pod", "llm", "vllm-0", "stuck", "stuck-abc", 1.5e9, uid="u1")
text = st.text(max_size=40)
times = st.none() | st.floats(0, 2e9)
submitted = st.builds(Submitted, text, text, text, text, st.booleans(), text)
ended = st.builds(Ended, text, st.sampled_from(["Succeeded", "Failed", "Error"]), text,
                  st.none() | text, st.none() | text, text)  # fmt: skip
notes = st.one_of(
    st.builds(Acted, st.just(DECISION), st.none() | submitted),
    st.builds(Finished, st.just(DECISION), ended),
    st.builds(WouldHave, st.just(DECISION), text),
    st.builds(CouldNot, st.just(DECISION), text),
    st.builds(NotStarted, st.just(DECISION), text, text, st.floats(0, 1e6), text),
    st.builds(Spared, st.just(DECISION), text),
)
commands = st.one_of(
    st.builds(Tell, notes, st.none() | text, times),
    st.builds(Submit, st.just(DECISION)),
    st.builds(Poll, st.just(DECISION), text),
)


@given(commands)
def test_every_command_round_trips_through_the_codec(command: Command) -> None:
    assert decode(encode(command), Command) == command  # type: ignore[arg-type]


@given(st.builds(Tell, notes, st.none() | text, times))
def test_a_tell_round_trips_as_a_tell(tell: Tell) -> None:
    assert decode(encode(tell), Tell) == tell


def test_a_bad_note_is_refused_whole_and_says_where() -> None:
    good = encode(Tell(Spared(DECISION, "Ready again")))
    with pytest.raises(msgspec.ValidationError, match=r"note"):
        decode(good.replace(b'"Spared"', b'"Exploded"'), Tell)
