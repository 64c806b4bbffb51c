"""A guard restored from its rows reads the candidates topic again from the oldest
record with a candidate still waiting (waiting candidates get no row of their own):
killed after any batch, it releases exactly what a guard never killed releases, each
candidate once, in the same order."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.decision import Decision, Suppressed
from remediator.policy_file import load_policy
from remediator.streams.core import Candidate, GuardCore, GuardRecord, Learned, Released, Watermark

PARTITIONS = 3
# A cooldown and a blast radius of one: the order and the time of every judgement matter.
POLICY = "guardrails: {cooldown: {seconds: 30}, blast_radius: {max_pods: 1, window_s: 60}}"


def topic(seed: int) -> list[list[GuardRecord]]:
    """Candidates-topic records (each a partition batch's records), in an order a broker
    could hold them: each partition's own in time order, a watermark after its
    candidates, the partitions interleaved; a late candidate now and then."""
    rng = random.Random(seed)
    out: list[list[GuardRecord]] = []
    clocks = [0.0] * PARTITIONS
    for n in range(rng.randint(5, 40)):
        p = rng.randrange(PARTITIONS)
        batch: list[GuardRecord] = []
        for _ in range(rng.randint(0, 3)):
            at = clocks[p] + rng.choice([0.0, 1.0, 5.0])
            if rng.random() < 0.2:
                batch.append(Learned(at, p, (("m", "engine_init", rng.uniform(50, 90)),)))
            else:
                workload = f"ns/Deployment/w{rng.randrange(3)}"
                i = f"{n}-{len(batch)}"
                d = Decision("delete-pod", "ns", f"pod-{i}", "why", f"inc-{i}", at, uid=f"u{i}",
                             workload=workload, pod_created_at=at - 3600.0,
                             expected_cold_start_s=60.0)  # fmt: skip
                batch.append(Candidate(d, at, p, "m"))
        if rng.random() < 0.7:
            clocks[p] += rng.choice([1.0, 10.0, 30.0])
            batch.append(Watermark(p, clocks[p]))
        out.append(batch)
    out.append([Watermark(p, max(clocks) + 100.0) for p in range(PARTITIONS)])
    return out


def said(released: list[Released]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for r in released:
        if isinstance(r.result, Decision):
            out.append(("decided", r.result.incident, r.result.at))
        elif isinstance(r.result, Suppressed):
            out.append(("held", r.result.decision.incident, r.result.guardrail, r.result.retry_at))
        elif isinstance(r.feedback, Learned):
            out.append(("learned", r.feedback.at, r.feedback.samples))
    return out


def run(guard: GuardCore, records: list[list[GuardRecord]], start: int, stop: int,
        table: dict[str, Any], batch: int) -> list[Released]:  # fmt: skip
    """Offsets start..stop-1 taken as the worker takes them, `batch` records at a time,
    the changed rows written after each batch; records before `guard.read` passed over."""
    released: list[Released] = []
    for first in range(start, stop, batch):
        for offset in range(first, min(first + batch, stop)):
            if offset < guard.read:
                continue
            for record in records[offset]:
                released.extend(guard.take(record, offset))
        for row, value in guard.changed().items():
            if value is None:
                table.pop(row, None)
            else:
                table[row] = value
    return released


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), kill=st.integers(0, 60), batch=st.integers(1, 4),
       committed=st.integers(0, 60))  # fmt: skip
def test_a_restored_guard_releases_what_one_never_killed_does(
    seed: int, kill: int, batch: int, committed: int
) -> None:
    records = topic(seed)
    policy = load_policy(POLICY)
    whole = run(GuardCore(policy, PARTITIONS), records, 0, len(records), {}, batch)
    assert any(isinstance(r.result, Decision) for r in whole)

    table: dict[str, Any] = {}
    kill = min(kill - kill % batch, len(records))  # killed after a batch: its rows written
    before = run(GuardCore(policy, PARTITIONS), records, 0, kill, table, batch)
    restored = GuardCore.from_rows(policy, PARTITIONS, dict(table))
    # Faust gives it what follows its committed offset (anywhere up to the kill); it
    # reads again from `replay_from` if that is later than where it needs to be.
    start = min(committed, kill)
    if (again := restored.missed_before(start)) is not None:
        start = again  # as the worker reads it again
    after = run(restored, records, start, len(records), table, batch)
    assert said(before) + said(after) == said(whole)


def test_waiting_candidates_taken_from_the_topic_get_no_rows() -> None:
    guard = GuardCore(load_policy(POLICY), PARTITIONS)
    records = topic(7)
    table: dict[str, Any] = {}
    run(guard, records, 0, len(records) - 1, table, 2)
    assert not [k for k in table if k.startswith("pending")]
    assert table["marks"]["from"] <= table["marks"]["taken"] + 1
