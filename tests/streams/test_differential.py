"""Issue 19's differential without Kafka: each stream of tests/kafka/differential.py through
one `Session` and through the Kafka runtime's cores (eight partitions and the guard, the
records handed over in-process as a broker would), compared as the real-broker test
(tests/kafka/test_differential.py) compares the workers. Fast, so it runs in the unit part
and says which stream differs before a broker is started. The guard split by workload
(streams/tiers.py) is held to the same."""

from __future__ import annotations

import pytest

from tests.kafka.differential import (
    FLEETS,
    Stream,
    compact,
    fleet,
    recorded_streams,
    through_cores,
    through_session,
)

RECORDED = {s.name: s for s in recorded_streams()}


def stream_named(name: str) -> Stream:
    return compact(fleet(name) if name in FLEETS else RECORDED[name])


@pytest.mark.parametrize("name", [*RECORDED, *FLEETS])
@pytest.mark.parametrize("partitions", [1, 8])
def test_the_kafka_cores_do_what_one_session_does(name: str, partitions: int) -> None:
    stream = stream_named(name)
    reference = through_session(stream).sorted()
    got = through_cores(stream, partitions).sorted()
    assert reference.histograms, "the stream must show cold starts"
    assert got.decisions == reference.decisions
    assert got.holds == reference.holds
    assert got.suppressions == reference.suppressions
    assert got.histograms == reference.histograms
    assert got.budget == reference.budget  # paid, and spent as settled


@pytest.mark.parametrize("name", [*RECORDED, *FLEETS])
@pytest.mark.parametrize(("seed", "here"), [(None, False), (1, False), (2, True), (None, True)])
def test_the_guard_split_by_workload_does_what_one_session_does(
    name: str, seed: int | None, here: bool
) -> None:
    """The guard's first tier over three candidates partitions, the second over `admitted`
    (streams/tiers.py), the topics' partitions delivered in arrival order or interleaved at
    random (`seed`); `here`: the tiers in one worker, passing records in process too."""
    stream = stream_named(name)
    reference = through_session(stream).sorted()
    got = through_cores(stream, 8, tiers=3, seed=seed, here=here).sorted()
    assert got.decisions == reference.decisions
    assert got.holds == reference.holds
    assert got.suppressions == reference.suppressions
    assert got.histograms == reference.histograms
    assert got.budget == reference.budget


def test_the_streams_act_hold_and_loop() -> None:
    """The comparisons above are not between empty lists: the streams act, a guardrail
    holds, and the untuned fleet's kill loops are held."""
    seen = [through_session(stream_named(n)) for n in [*RECORDED, *FLEETS]]
    assert sum(len(s.decisions) for s in seen) >= 10
    assert sum(len(s.suppressions) for s in seen) >= 10
    loops = through_session(stream_named("fleet untuned, seed rule (kill loops)"))
    assert any("was deleted for exceeding it" in d[2] or "took longer" in d[2]
               for d in loops.holds)  # fmt: skip


def test_the_hedged_stream_hedges_and_holds_hedges_both_ways() -> None:
    """Hedges let through, held by the budget, and held for GPUs short: what the guard
    must hear from every partition to judge as one process does."""
    seen = through_session(stream_named("fleet tuned, hedged, GPUs short"))
    assert any(d[0] == "hedge-pod" for d in seen.decisions)
    assert seen.budget is not None and seen.budget[0] > 0 and seen.budget[1] > 0
    assert any(r.startswith("hedge budget: ") for r in seen.because)
    assert any(r.startswith("no hedge: ") and "short of GPUs" in r for r in seen.because)
