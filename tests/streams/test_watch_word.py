"""The ingest's word on its watch, as the partitions and the guard act on it (no Kafka).

serve holds pod deletions while its watch's picture may lag the API server's and looks
at the held pods again the moment it has caught up (tests/runtime/test_behind_hold.py).
On Kafka the watch runs in the ingest, which says every second in its ticks how it
stands (`tick_record(at, watch)`); each partition stamps its candidates with that word,
the guard holds on it, and silence (an ingest dead or paused) is behind too.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from remediator.contract.codec import encode
from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.records import InputError, Relisted
from remediator.policy_file import load_policy
from remediator.streams.core import (
    NO_WORD,
    Candidate,
    GuardCore,
    PartitionCore,
    Watermark,
    feedback_record,
    parse_guard_record,
    relisted_record,
    tick_record,
)
from remediator.streams.keys import split
from remediator.streams.pods import TICK, WORD, PartitionRows, relisted_key
from tests.runtime.test_cluster_time import POLICY
from tests.runtime.test_look_again import became_ready
from tests.runtime.test_virtual_clock import T0, pod

RELISTING = "watch Pod/llm relisting: 410 Gone"


class OnePartition:
    """One partition and the guard, records handed over as the worker hands them."""

    def __init__(self, watched: bool | None = None) -> None:
        policy = load_policy(POLICY)
        self.core = PartitionCore(policy, 0, 1, CollectorRegistry(), watched=watched)
        self.guard = GuardCore(policy, 1)
        self.decided: list[Decision] = []
        self.held: list[Suppressed] = []
        self.candidates: list[Candidate] = []

    def doc(self, doc: dict[str, Any]) -> None:
        for record in split(orjson.dumps(doc)):
            self.run(record.value)

    def tick(self, at: float, watch: str | None = None) -> None:
        self.run(tick_record(T0 + at, watch))

    def run(self, raw: bytes) -> None:
        queue = [raw]
        while queue:
            raw = queue.pop(0)
            out: list[Any] = list(self.core.feed(raw))
            if raw.startswith(b'{"remediator":"tick"'):
                out.append(Watermark(0, self.core.now))
            for record in out:
                wire = parse_guard_record(encode(record))  # as it crosses the topic
                if isinstance(wire, Candidate):
                    self.candidates.append(wire)
                for released in self.guard.take(wire):
                    if isinstance(released.result, Decision):
                        self.decided.append(released.result)
                    elif isinstance(released.result, Suppressed):
                        self.held.append(released.result)
                    if released.feedback is not None:
                        queue.append(feedback_record(released.feedback))

    def targets(self) -> list[str]:
        return [d.target for d in self.decided if d.action == "delete-pod"]


def test_deletions_wait_while_the_ingest_says_behind_and_are_decided_again_once_current() -> None:
    """As serve: two pods lapse while the watch relists; the relist brings one's Ready; the
    word "current" has the other looked at again at once, on the fresh picture."""
    p = OnePartition()
    for name in ("ready-soon", "hung"):
        p.doc(pod(name, started=T0))
    p.tick(10, "")
    p.tick(250, RELISTING)  # the stream was cut: a pod becomes Ready meanwhile
    p.tick(301, RELISTING)  # both budgets lapse on the old picture...
    assert p.decided == []  # ...and nothing is decided: held
    assert {s.guardrail for s in p.held} == {"watch_current"}
    assert sorted(s.decision.target for s in p.held) == ["hung", "ready-soon"]
    assert all(c.behind == RELISTING for c in p.candidates)
    p.doc(became_ready("ready-soon", T0 + 280))  # the relist's news...
    p.tick(302, "")  # ...then the word: caught up
    assert p.targets() == ["hung"]  # at once, not a check interval later
    assert p.decided[0].at == T0 + 302


def test_silence_from_the_ingest_is_behind() -> None:
    """An ingest that stopped talking (dead, paused) brings no pod's Ready either: the
    worker's own ticks move the clock on, and the deletion waits; the word again frees it."""
    p = OnePartition()
    p.doc(pod("hung", started=T0))
    p.tick(200, "")
    p.tick(301)  # a worker's tick: no word for 101 s
    assert p.decided == []
    assert [s.decision.target for s in p.held] == ["hung"]
    assert p.candidates[-1].behind == "no word from the ingest's watch for 101s"
    p.tick(302, "")
    assert p.targets() == ["hung"]


def test_a_word_missed_by_less_than_the_silence_allowed_holds_nothing() -> None:
    p = OnePartition()
    p.doc(pod("hung", started=T0))
    p.tick(295, "")
    p.tick(301)  # 6 s since the word: under WATCH_SILENT_S
    assert p.targets() == ["hung"]


@pytest.mark.parametrize(
    ("watched", "held"),
    [(True, True), (None, False), (False, False)],
    ids=["required", "auto", "off"],
)
def test_before_any_word(watched: bool | None, held: bool) -> None:
    """Required: nothing is deleted before the ingest has said its watch is current. Auto:
    an ingest of webhooks alone never says anything, and nothing is held."""
    p = OnePartition(watched)
    p.doc(pod("hung", started=T0))
    p.tick(301)
    assert p.targets() == ([] if held else ["hung"])
    if held:
        assert p.candidates[-1].behind == NO_WORD


def test_off_ignores_the_word() -> None:
    p = OnePartition(watched=False)
    p.doc(pod("hung", started=T0))
    p.tick(301, RELISTING)
    assert p.targets() == ["hung"]


def test_a_hold_the_guard_sends_back_after_the_catch_up_is_looked_at_again_at_once() -> None:
    """The guard's "held" may come back after the partition has heard "current" (it is
    another process): the pod is looked at again then, not forgotten."""
    policy = load_policy(POLICY)
    core = PartitionCore(policy, 0, 1, CollectorRegistry())
    guard = GuardCore(policy, 1)
    core.feed(orjson.dumps(pod("hung", started=T0)))
    out = core.feed(tick_record(T0 + 301, RELISTING))
    (candidate,) = [c for c in out if isinstance(c, Candidate)]
    guard.take(candidate)
    (released,) = guard.take(Watermark(0, T0 + 301))
    assert isinstance(released.result, Suppressed)
    assert core.feed(tick_record(T0 + 302, "")) == []  # current: nothing held here yet
    again = core.feed(feedback_record(released.feedback))  # type: ignore[arg-type]
    assert [(c.decision.target, c.behind) for c in again if isinstance(c, Candidate)] == [
        ("hung", "")
    ]


def test_a_complete_list_forgets_a_pod_deleted_while_the_watch_was_away() -> None:
    p = OnePartition()
    gone, kept = pod("gone", started=T0), pod("kept", started=T0)
    p.doc(gone)
    p.doc(kept)
    p.tick(100, "")
    uid = kept["metadata"]["uid"]  # a Pod object as a list holds it
    listed = Relisted("Pod", "llm", frozenset({uid}), 42, None, T0 + 200)
    p.run(relisted_record(listed))
    p.tick(301, "")
    assert p.targets() == ["kept"]


def test_the_rows_keep_the_last_word_and_list_and_a_rebuild_says_the_same() -> None:
    """A worker that takes the partition over rebuilds it from the rows: the last word and
    each watch's last list come back (only the last of each is kept)."""
    rows = PartitionRows({}, 0)
    words = [tick_record(T0 + at, why) for at, why in ((10, ""), (250, RELISTING))]
    listed = relisted_record(Relisted("Pod", "llm", frozenset(), 1, None, T0 + 5))
    key = relisted_key("Pod", "llm", None)
    records = [
        (orjson.dumps(pod("hung", started=T0)), "llm/hung"),
        (listed, key),
        (words[0], WORD),
        (listed, key),
        (words[1], WORD),
        (tick_record(T0 + 260), TICK),
    ]
    for offset, (raw, name) in enumerate(records):
        rows.add(offset, raw.decode(), name)
    rows.flush()
    assert sorted(rows.table) == sorted(["0|000000000000", f"0|{key}", f"0|{WORD}", f"0|{TICK}"])
    rebuilt = PartitionCore(load_policy(POLICY), 0, 1)
    for entry in rows.replay():
        rebuilt.feed(entry.raw.encode(), entry.at)
    assert rebuilt.behind == RELISTING


def test_a_list_record_that_does_not_decode_is_refused_as_bad_input() -> None:
    core = PartitionCore(load_policy(POLICY), 0, 1)
    with pytest.raises(InputError, match="complete list"):
        core.feed(b'{"remediator":"relisted","record":{"kind":"Pod"}}')
