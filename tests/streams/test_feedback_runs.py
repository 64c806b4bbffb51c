"""The guard's feedback to one partition, cut into runs by the key its rows keep it under
(`streams.core.feedback_runs`): a pod's "not yet" under the pod's own key, so it leaves the
`pods` table with the pod (tests/kafka/test_prune.py, on a real broker); cold starts learned
elsewhere under the learned key, folded (tests/streams/test_fold.py); the rest under the
feedback key, never pruned. Cutting must change nothing the partition is fed: the same
records, in the same order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from remediator.contract.codec import decode
from remediator.contract.records import Feedback, GotThrough, Learned, RetryAt
from remediator.streams.core import (
    FEEDBACK_KEY,
    feedback_batch,
    feedback_runs,
    feedback_value,
    unpack,
)
from remediator.streams.pods import LEARNED_KEY
from tests.streams.test_cores import stuck

_BATCH = b'{"remediator":"feedback","records":'


def _records(value: bytes) -> list[Feedback | Learned]:
    assert value.startswith(_BATCH)
    return decode(value[len(_BATCH) : -1], list[Feedback | Learned])


def _record(kind: int, pod: int) -> Feedback | Learned:
    d = stuck(f"pod-{pod}", f"inc-{pod}", 100.0 + pod)
    if kind == 0:
        return RetryAt(d, d.at, d.at + 30.0)
    if kind == 1:
        return GotThrough(d, d.at, False)
    return Learned(d.at, 1, (("m", "total", 60.0 + pod),))


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), max_size=30))
def test_runs_are_the_records_in_order_each_under_its_key(spec: list[tuple[int, int]]) -> None:
    records = [_record(kind, pod) for kind, pod in spec]
    runs = feedback_runs(records)
    assert [r for _, value in runs for r in _records(value)] == records
    keys = [key for key, _ in runs]
    assert all(a != b for a, b in zip(keys, keys[1:], strict=False)), "a run per change of key"
    for key, value in runs:
        for r in _records(value):
            if isinstance(r, RetryAt):
                assert key == f"ns/{r.decision.target}"
            else:
                assert key == (LEARNED_KEY if isinstance(r, Learned) else FEEDBACK_KEY)


def test_one_run_of_lasting_feedback_goes_as_before_else_as_an_envelope() -> None:
    lasting = [_record(1, 0), _record(1, 1)]
    assert feedback_value(feedback_runs(lasting)) == feedback_batch(lasting)
    mixed = [_record(1, 0), _record(0, 1), _record(0, 1), _record(2, 2)]
    docs = unpack(feedback_value(feedback_runs(mixed)))
    assert [d.key for d in docs] == [FEEDBACK_KEY, "ns/pod-1", LEARNED_KEY]
    assert [r for d in docs for r in _records(bytes(d.raw))] == mixed
