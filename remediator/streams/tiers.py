"""The guard split by workload: a first tier per candidates partition, one second tier.

The guardrails are two tiers (docs/guardrails.md, "Order"). The first remembers only what
was let through for a decision's own workload (or what the runtime sets for every
workload), so it is split by workload over the candidates topic's partitions; the second
holds what the workloads spend together (blast radius, cordon cap, hedge budget, rate
limit, dry run) and is one, over the `admitted` topic:

    candidates (M, by workload) ── FirstTier (Guard.admit) ── Admitted ──▶ admitted (1)
          ▲                                                                   │
          └──────────── Settled (by workload): Guard.commit ◀── SecondTier (Guard.settle)

Both are `GuardCore`s: records released in time order up to a watermark, rows per key,
read again from the topic after a restart. A first tier judges its records in time order
and, while a workload's admitted candidate waits for the second tier's word, lets nothing
after it through: the same order one guard judges in (tests/guard/test_tiers.py proves
the split equal to one pipeline under that order; tests/streams/test_tiers.py the cores).
What it tells the second tier (`settles_to`) is how far it has admitted everything: the
second tier settles in time order up to the smallest of them, so the cluster-wide caps
see decisions in the order one guard would.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from remediator.contract.codec import Wire, decode, encode
from remediator.contract.records import Admitted, Candidate, Learned, Settled
from remediator.core.guard import workload_key
from remediator.streams.core import GuardCore, GuardRecord, Released

__all__ = ["FirstTier", "SecondTier", "route", "tier_of"]


def tier_of(workload: str, partitions: int) -> int:
    """The candidates partition of a workload's first tier: its decisions, its word back."""
    return zlib.crc32(workload.encode()) % partitions


def route(records: Sequence[GuardRecord], partitions: int) -> dict[int, list[GuardRecord]]:
    """What a decider sends the guard, by candidates partition: a candidate to its
    workload's first tier; what it learned and its watermarks to every one (each weighs
    cold starts by the cluster's history, and releases in time order)."""
    out: dict[int, list[GuardRecord]] = {}
    if partitions == 1:
        return {0: list(records)} if records else {}
    for record in records:
        if isinstance(record, Candidate):
            out.setdefault(tier_of(workload_key(record.decision), partitions), []).append(record)
        else:
            for m in range(partitions):
                out.setdefault(m, []).append(record)
    return out


@dataclass
class FirstTier(GuardCore):
    """One candidates partition's workloads (`index`): the workload tier of the
    guardrails, the cluster's history (every partition's `Learned`), the pods it holds
    until old enough. Partition 0 relays what was learned to the deciders and forwards the
    hedge budget's news to the second tier, once."""

    index: int = 0
    # workload -> its candidate let on to the second tier, not yet answered (a row each)
    admitted: dict[str, Admitted] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._head: tuple[int, str | None] = (-1, None)  # seq -> its workload, decoded once

    @property
    def settles_to(self) -> float:
        """It will let on nothing made before this time: the second tier's watermark
        for it. (What waits behind a workload is let on later, at its own time.)"""
        frontier = self.frontier
        if self.pending and self._waits():
            return min(frontier, self.pending[0][0])
        return frontier

    def _waits(self) -> bool:
        _, kind, seq, raw = self.pending[0]
        if kind == 0:
            return False  # a learned record: no workload's
        if self._head[0] != seq:
            self._head = (seq, workload_key(decode(raw, Candidate).decision))
        return self._head[1] in self.admitted

    def _learn(self, record: Learned, at: float) -> list[Released]:
        self._history(record)
        out = self._reweigh(record)  # the pods this partition holds
        if self.index != 0:
            return out
        relay = Released(None, record.partition, msgspec.structs.replace(record, gpus=None))
        out.insert(0, relay)
        if record.gpus is not None:  # the second tier's alone
            news = msgspec.structs.replace(record, samples=())
            out.append(Released(None, record.partition, None, onward=news))
        return out

    def _decide(self, record: Candidate, weighed: Candidate) -> list[Released]:
        """The workload tier (`Guard.admit`): held here, or on to the second tier."""
        held = self.guard.admit(weighed, self.clock)
        if held is not None:
            return [Released(held[0], record.partition, held[1])]
        workload = workload_key(record.decision)
        self.admitted[workload] = admitted = Admitted(weighed, self.clock, self.index)
        self._dirty.add(f"admitted|{workload}")
        return [Released(None, record.partition, None, onward=admitted)]

    def _settled(self, settled: Settled) -> None:
        admitted = self.admitted.get(settled.workload)
        if admitted is None or (admitted.candidate.decision.incident, admitted.at) != (
            settled.incident,
            settled.at,
        ):
            return  # read again after a restart: answered already
        del self.admitted[settled.workload]
        self._dirty.add(f"admitted|{settled.workload}")
        if not settled.through:
            return
        before = self.guard.state
        self.guard.commit(admitted.candidate, admitted.at)
        self._touched(before)
        if admitted.candidate.once:
            self._tell(admitted.candidate.decision.incident)

    # ---- the table: the guard core's rows, and a row per admitted candidate ------------
    def changed(self) -> dict[str, Any]:
        prefix = "admitted|"
        mine = [k for k in self._dirty if k.startswith(prefix)]
        rows = super().changed()
        for key in mine:
            admitted = self.admitted.get(key[len(prefix) :])
            rows[key] = None if admitted is None else encode(admitted).decode()
        return rows

    def to_json(self) -> str:
        self._dirty |= {f"admitted|{w}" for w in self.admitted}
        return super().to_json()

    @classmethod
    def restore(
        cls, config: Any, partitions: int, index: int, rows: dict[str, Any], **kw: Any
    ) -> FirstTier:
        core = cls.from_rows(config, partitions, rows, **kw)
        assert isinstance(core, FirstTier)
        core.index = index
        for key, value in rows.items():
            if key.startswith("admitted|") and value is not None:
                core.admitted[key.split("|", 1)[1]] = decode(value, Admitted)
        return core


@dataclass
class SecondTier(GuardCore):
    """The cluster tier of the guardrails over every first tier's admitted candidates (its
    `partitions`: the candidates topic's), in time order: what goes to the commands
    topic, the feedback for the deciders, and the `Settled` word back to the first tier."""

    def _learn(self, record: Learned, at: float) -> list[Released]:
        assert record.gpus is not None, "the second tier hears only the hedge budget's news"
        self.guard.hear(record.gpus, at)
        self._dirty.add("state")
        return []

    def _judge(self, record: Wire, at: float) -> list[Released]:
        assert isinstance(record, Admitted)
        self._advance(at)
        candidate, before = record.candidate, self.guard.state
        (result, feedback), through = self.guard.settle(candidate, self.clock)
        self._touched(before)
        d = candidate.decision
        settled = Settled(workload_key(d), d.incident, record.at, through)
        return [Released(result, candidate.partition, feedback, onward=settled)]
