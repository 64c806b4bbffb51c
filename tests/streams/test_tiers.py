"""The guard split by workload (streams/tiers.py) judges as one `GuardCore` does.

Random streams of decisions over three workloads and nodes, under random guard configs,
dry run on and off, the kill switch and the watch's lag switched on and off, go through
one guard core, and through first tiers (a candidates partition each, by workload) and
the second tier, their records delivered in any order a broker could deliver them in,
tiers restarted from their rows at random moments (a restored first tier sending again
what it still waits on), with every tier in one worker passing records in process or not.
Both say the same of every decision,
with the same feedback for the deciders. (tests/kafka/differential.py runs the fleet's
and the recorded streams through the partitions and the tiers; this holds the guardrails'
every branch to it.)"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from remediator.contract.codec import decode_wire, encode
from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import Admitted, Candidate, Learned, Settled, Watermark
from remediator.core.guard import Verdicts, workload_key
from remediator.guard.config import GuardConfig
from remediator.policy_file import PolicyFile, load_policy
from remediator.streams.core import GuardCore, Released
from remediator.streams.tiers import FirstTier, SecondTier, tier_of
from tests.guard.test_properties import configs
from tests.guard.test_tiers import Event, streams
from tests.kafka.differential import Topics

PARTITIONS = 2  # the deciders' (input partitions)
TIERS = 3  # the first tier's (candidates partitions)
END = 1e12  # every partition done (JSON has no infinity)
Verdict = tuple[str, str | None, float | None, str | None, float | None]


def retimed(stream: list[Event]) -> list[Event]:
    """The stream at strictly rising times: one guard and the second tier break a tie by
    arrival, which a broker does not keep across partitions."""
    out: list[Event] = []
    for i, (now, item) in enumerate(stream):
        at = now + i * 1e-3
        out.append((at, item if isinstance(item, str) else replace(item, at=at)))
    return out


def candidates(stream: list[Event]) -> list[tuple[float, Candidate | str]]:
    behind, out = "", []
    for at, item in stream:
        if item.startswith("watch") if isinstance(item, str) else False:
            behind = "relisting" if item.endswith("behind") else ""
        elif isinstance(item, str):
            out.append((at, item))
        else:
            p = len(item.target) % PARTITIONS
            out.append((at, Candidate(item, at, p, "m", "engine_init", behind=behind)))
    return out


def verdict(r: Released) -> Verdict:
    fb = r.feedback
    retry = getattr(fb, "not_before", None)
    if isinstance(r.result, Suppressed):
        s = r.result
        return ("held", s.guardrail, s.retry_at, type(fb).__name__ if fb else None, retry)
    return ("through", None, None, type(fb).__name__ if fb else None, retry)


class Tiers:
    """The first tiers and the second, records between them kept as topics keep them;
    `here`: every tier in one worker, which also passes each record to the other tier at
    once (streams/app.py `onward`): a word to its first tier, a first tier's record to
    the second where nothing before it in the topic is still to take. Their copies are
    read from the topics too, as a worker reads them."""

    def __init__(self, policy: PolicyFile, seed: int, every: int | None, here: bool) -> None:
        self.policy, self.verdicts = policy, Verdicts(CollectorRegistry())
        self.first = [FirstTier(policy, PARTITIONS, self.verdicts, index=m) for m in range(TIERS)]
        self.second = SecondTier(policy, TIERS, self.verdicts)
        self.told = [-math.inf] * TIERS
        self.topics, self.out = Topics(seed), {}
        self.every, self.taken = every, 0  # a tier restarted every that many records,
        self.restarts = 6  # at most this often (each reads again: never a livelock)
        self.here, self.passed = here, 0  # records passed in process

    def send(self, record: Candidate | Watermark) -> None:
        if isinstance(record, Candidate):
            self.topics.send(("candidates", tier_of(workload_key(record.decision), TIERS)),
                             encode(record))  # fmt: skip
        else:
            for m in range(TIERS):
                self.topics.send(("candidates", m), encode(record))

    def kill_switch(self, engaged: bool) -> None:
        for tier in self.first:
            tier.set_kill_switch(engaged, "")

    def drain(self) -> None:
        while (taken := self.topics.take()) is not None:
            (topic, m), offset, raw, _ = taken
            record = decode_wire(raw)
            if topic == "candidates":
                assert isinstance(record, Candidate | Learned | Watermark | Settled)
                self.released(self.first[m].take_batch([record], offset), m)
            else:
                assert isinstance(record, Admitted | Learned | Watermark)
                self.released(self.second.take_batch([record], offset))
            self.taken += 1
            if self.every and self.taken % self.every == 0 and self.restarts:
                self.restarts -= 1
                self.restart(self.taken // self.every)

    def restart(self, which: int) -> None:
        """A tier rebuilt from its rows, as a worker that takes its partition over: it
        reads its topic partition again from where the rows say."""
        m = which % (TIERS + 1)
        if m == TIERS:
            rows = json.loads(self.second.to_json())
            second = SecondTier.from_rows(self.policy, TIERS, rows, self.verdicts)
            self.second = second
            self.topics.rewind(("admitted", 0), second.replay_from)
            return
        rows = json.loads(self.first[m].to_json())
        first = FirstTier.from_rows(self.policy, PARTITIONS, rows, self.verdicts, index=m)
        self.first[m] = first
        self.topics.rewind(("candidates", m), first.replay_from)
        self.released(first.unanswered(), m)  # as a worker sends them again

    def released(self, out: list[Released], by: int | None = None) -> None:
        """What a tier said (`by`: a first tier, which then tells how far it let on)."""
        work = deque([(out, by)])
        while work:
            said, m = work.popleft()
            for r in said:
                if r.result is not None:
                    d = r.result.decision if isinstance(r.result, Suppressed) else r.result
                    assert (d.incident, d.at) not in self.out, "said twice"
                    self.out[d.incident, d.at] = verdict(r)
                if isinstance(r.onward, Settled):
                    to = tier_of(r.onward.workload, TIERS)
                    self.topics.send(("candidates", to), encode(r.onward))
                    if self.here:
                        self.passed += 1
                        work.append((self.first[to].take_batch([r.onward]), to))
                elif r.onward is not None:
                    self.up(r.onward, work)
            if m is not None and self.first[m].settles_to > self.told[m]:
                self.told[m] = self.first[m].settles_to
                self.up(Watermark(m, self.told[m]), work)

    def up(self, record: Admitted | Learned | Watermark, work: deque) -> None:
        offset = self.topics.send(("admitted", 0), encode(record))
        if self.here and offset == self.second.read:
            self.passed += 1
            work.append((self.second.take_batch([record], offset), None))


def one_guard(policy: PolicyFile, events: list[tuple[float, Candidate | str]]) -> dict:
    guard, out = GuardCore(policy, PARTITIONS, Verdicts(CollectorRegistry())), {}

    def take(record: Candidate | Watermark) -> None:
        for r in guard.take(record):
            if r.result is not None:
                d = r.result.decision if isinstance(r.result, Suppressed) else r.result
                out[d.incident, d.at] = verdict(r)

    for at, item in events:
        if isinstance(item, str):
            for p in range(PARTITIONS):
                take(Watermark(p, at - 1e-4))
            guard.set_kill_switch(item.endswith("on"), "")
            continue
        take(item)
        for p in range(PARTITIONS):
            take(Watermark(p, at))
    for p in range(PARTITIONS):
        take(Watermark(p, END))
    return out


def through_tiers(
    policy: PolicyFile,
    events: list[tuple[float, Candidate | str]],
    seed: int,
    every: int | None,
    here: bool = False,
) -> dict:
    tiers = Tiers(policy, seed, every, here)
    for at, item in events:
        if isinstance(item, str):  # set once everything before it is judged, as above
            for p in range(PARTITIONS):
                tiers.send(Watermark(p, at - 1e-4))
            tiers.drain()
            tiers.kill_switch(item.endswith("on"))
            continue
        tiers.send(item)
        for p in range(PARTITIONS):
            tiers.send(Watermark(p, at))
    for p in range(PARTITIONS):
        tiers.send(Watermark(p, END))
    tiers.drain()
    assert tiers.passed or not here or not tiers.out, "nothing passed in process"
    return tiers.out


@settings(max_examples=200, deadline=None)
@given(
    config=configs,
    dry=st.booleans(),
    stream=streams(),
    seed=st.integers(0, 2**16),
    every=st.none() | st.integers(3, 60),
    here=st.booleans(),
)
def test_the_tiers_judge_as_one_guard(
    config: GuardConfig, dry: bool, stream: list[Event], seed: int, every: int | None, here: bool
) -> None:
    policy = PolicyFile(guardrails=config)
    policy = policy.with_dry_run() if dry else policy
    events = candidates(retimed(stream))
    expected = one_guard(policy, events)
    assert len(expected) == sum(isinstance(c, Candidate) for _, c in events)
    assert through_tiers(policy, events, seed, every, here) == expected


OLD_ENOUGH = "guardrails: {min_age: {factor: 0}}"


def _candidate(workload: str, incident: str, at: float) -> Candidate:
    d = Decision("delete-pod", "ns", f"{incident}-pod", "why", incident, at, uid=incident,
                 workload=workload, pod_created_at=at - 3600.0,
                 expected_cold_start_s=60.0)  # fmt: skip
    return Candidate(d, at, 0, "m", "engine_init")


def _word(admitted: Admitted, through: bool) -> Settled:
    """The second tier's word on `admitted`."""
    d = admitted.candidate.decision
    return Settled(workload_key(d), d.incident, admitted.at, through, admitted.seq)


def test_a_workload_waits_for_its_word_and_an_old_word_answers_nothing() -> None:
    tier = FirstTier(load_policy(OLD_ENOUGH), partitions=1, index=0)
    [first] = tier.take(_candidate("ns/Deployment/a", "a1", 1.0)) + tier.take(Watermark(0, 1.0))
    assert isinstance(first.onward, Admitted) and first.result is None
    # the workload's next waits for the second tier's word; another workload's does not
    assert tier.take(_candidate("ns/Deployment/a", "a2", 2.0)) == []
    assert tier.take(_candidate("ns/Deployment/b", "b1", 3.0)) == []
    [other] = tier.take(Watermark(0, 3.0))
    assert isinstance(other.onward, Admitted)
    assert other.onward.candidate.decision.incident == "b1"
    assert tier.settles_to == 2.0  # a2 is still to be let on, at its time
    word = _word(first.onward, True)
    [then] = tier.take(word)
    assert isinstance(then.onward, Admitted) and then.onward.at == 2.0
    assert tier.take(word) == []  # read again after a restart: answers nothing
    assert set(tier.admitted) == {"ns/Deployment/a", "ns/Deployment/b"}
    assert tier.settles_to == 3.0


WINDOW = """
guardrails:
  min_age: {factor: 0}
  dedup: {window_s: 30}
  blast_radius: {max_pods: 100, max_percent: 100, max_pods_cluster: 100}
  rate_limit: {per_minute: 600, burst: 100}
"""


def test_a_waiting_workload_is_judged_on_its_own_state() -> None:
    """Another workload's decision recorded meanwhile, at a later time, prunes what it
    records (dedup's window) by that time: a workload judged later at its own, earlier
    time must still see its own records, as one guard judged it then."""
    tier = FirstTier(load_policy(WINDOW), partitions=1, index=0)
    a, b = "ns/Deployment/a", "ns/Deployment/b"

    def admit(c: Candidate) -> Admitted:
        [r] = tier.take(c) + tier.take(Watermark(0, c.at))
        assert isinstance(r.onward, Admitted), r
        return r.onward

    first = admit(_candidate(a, "p1", 0.0))
    assert tier.take(_word(first, True)) == []
    second = admit(_candidate(a, "p2", 10.0))  # in flight
    c = _candidate(a, "p1", 15.0)  # the first pod again, 15 s on: a duplicate
    again = Candidate(replace(c.decision, incident="p1-again"), 15.0, 0, "m", "engine_init")
    assert tier.take(again) == [] and tier.take(Watermark(0, 15.0)) == []
    other = admit(_candidate(b, "q1", 40.0))
    assert tier.take(_word(other, True)) == []  # recorded at 40
    [judged] = tier.take(_word(second, False))
    assert isinstance(judged.result, Suppressed) and judged.result.guardrail == "dedup"


def test_a_newer_releases_records_in_a_workloads_state_are_kept_and_named() -> None:
    """After a rollback: a workload's state row holds a record of a guardrail this release
    does not have. It is named (the worker logs FOREIGN_RECORDS), and written back
    unchanged once the workload's next decision changes the state."""
    newer = {"nodes": [["gpu-node-3", 1.0]]}
    a = "ns/Deployment/a"
    rows = {f"state|{a}": json.dumps({"version": 1, "node_quiet": newer})}
    tier = FirstTier.from_rows(load_policy(OLD_ENOUGH), 1, rows, index=0)
    assert tier.foreign == ("node_quiet",)
    [r] = tier.take(_candidate(a, "a1", 1.0)) + tier.take(Watermark(0, 1.0))
    assert isinstance(r.onward, Admitted)
    state = json.loads(str(tier.changed()[f"state|{a}"]))
    assert state["node_quiet"] == newer


def test_an_old_word_does_not_answer_the_next_candidate_of_its_incident_and_time() -> None:
    """A workload's candidate held by the second tier, and the next one of the same
    incident at the same time let on: the first's word, read again (after a restart, or
    from the topic once passed in process), must not answer the second's."""
    tier = FirstTier(load_policy(OLD_ENOUGH), partitions=1, index=0)
    a = "ns/Deployment/a"
    tier.take(_candidate(a, "a1", 1.0))
    again = _candidate(a, "a1", 1.0)
    again = Candidate(replace(again.decision, reason="again"), 1.0, 0, "m", "engine_init")
    [first] = tier.take(again) + tier.take(Watermark(0, 1.0))
    assert isinstance(first.onward, Admitted)
    [then] = tier.take(_word(first.onward, False))  # held by the second tier: the next
    assert isinstance(then.onward, Admitted) and then.onward.at == first.onward.at
    assert tier.take(_word(first.onward, False)) == []
    assert tier.admitted[a] == then.onward  # still waits for its own word
    rows = json.loads(tier.to_json())
    restored = FirstTier.from_rows(load_policy(OLD_ENOUGH), 1, rows, index=0)
    assert restored.take(_word(first.onward, False)) == []
    assert restored.admitted[a] == then.onward and restored.admissions == 2


def _restarted(tier: FirstTier) -> FirstTier:
    return FirstTier.from_rows(tier.config, 1, json.loads(tier.to_json()), index=tier.index)


def _second_restarted(tier: SecondTier) -> SecondTier:
    return SecondTier.from_rows(tier.config, 1, json.loads(tier.to_json()))


def test_a_candidate_lost_on_its_way_is_sent_again_and_judged_once() -> None:
    """A worker killed after its first tier's rows reached the broker, and before what it
    sent with them did: the workload's admitted candidate never reached the second tier,
    or its word never came back. Restored, the first tier sends it again; the second judges
    it once and answers again what it answered (its word a row), and the workload goes on."""
    policy = load_policy(OLD_ENOUGH)
    first, second = FirstTier(policy, 1, index=0), SecondTier(policy, 1)
    a = "ns/Deployment/a"
    [let_on] = first.take(_candidate(a, "a1", 1.0)) + first.take(Watermark(0, 1.0))
    assert first.take(_candidate(a, "a2", 2.0)) + first.take(Watermark(0, 2.0)) == []
    first = _restarted(first)  # a1 lost on its way
    [again] = first.unanswered()
    assert again.onward == let_on.onward
    [judged] = second.take(again.onward) + second.take(Watermark(0, 5.0))
    assert isinstance(judged.result, Decision) and isinstance(judged.onward, Settled)
    # The word lost on its way back: restored again, sent again, answered again, not judged.
    first = _restarted(first)
    [twice] = first.unanswered()
    second = _second_restarted(second)
    [answer] = second.take(twice.onward)
    assert answer.result is None and answer.onward == judged.onward
    [next_one] = first.take(answer.onward)
    assert isinstance(next_one.onward, Admitted)
    assert next_one.onward.candidate.decision.incident == "a2"
    assert first.take(judged.onward) == []  # the first copy of the word, read at last
    [a2] = second.take(next_one.onward) + second.take(Watermark(0, 9.0))
    assert isinstance(a2.result, Decision | Suppressed)
    # a1 sent again once more, after a2's word: older than the last word, nothing
    assert second.take(twice.onward) + second.take(Watermark(0, 10.0)) == []
