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
read again from the topic after a restart. A first tier takes its records in time order,
each at the guard's clock as one guard would judge it; while a workload's admitted
candidate waits for the second tier's word, that workload's next candidates wait (a row),
each to be judged at its own time, on the workload's own guard state (another workload's
decisions recorded meanwhile, at later times, prune nothing of it). Other workloads go on.
What it tells the second tier (`settles_to`) is how far it has let everything on: the
smaller of its deciders' frontier and its oldest waiting candidate's time. The second
tier settles in time order up to the smallest of them, so the cluster-wide caps see
decisions in the order one guard would (tests/guard/test_tiers.py proves the split equal
to one pipeline under that order; tests/streams/test_tiers.py these cores, restarts too).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

import msgspec

from remediator.contract.codec import Wire, decode, encode
from remediator.contract.records import Admitted, Candidate, Learned, Settled
from remediator.core.guard import Verdicts, workload_key
from remediator.policy_file import PolicyFile
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


# A first tier's own rows: a workload's admitted candidate, its candidates waiting behind
# it, its guard state; the kill switch as last set, how many it admitted.
_ROWS = ("admitted|", "blocked|", "state|", "switch|", "admissions|")


@dataclass
class FirstTier(GuardCore):
    """One candidates partition's workloads (`index`): the workload tier of the
    guardrails, a guard state per workload, the cluster's history (every partition's
    `Learned`), the pods it holds until old enough. Partition 0 relays what was learned to
    the deciders and forwards the hedge budget's news to the second tier, once."""

    index: int = 0
    # workload -> its candidate let on to the second tier, not yet answered (a row each)
    admitted: dict[str, Admitted] = field(default_factory=dict)
    # workload -> its next candidates while one waits: (the time to judge at, the record)
    blocked: dict[str, list[tuple[float, bytes]]] = field(default_factory=dict)
    # workload -> its guard state (what its decisions let through; a row each). (A
    # `GuardState`: the guard's own module is not the Kafka runtime's to import.)
    states: dict[str, Any] = field(default_factory=dict)
    admissions: int = 0  # candidates let on so far: the last one's `seq`

    def __post_init__(self) -> None:
        super().__post_init__()
        self._fresh = self.guard.state  # a workload's before its first decision
        self._dirty.discard("state")  # a state per workload instead

    @property
    def settles_to(self) -> float:
        """It will let on nothing to be judged before this time: the second tier's
        watermark for it (a workload's next candidates wait for its word, at their time)."""
        waiting = (queue[0][0] for queue in self.blocked.values() if queue)
        return min(self.frontier, min(waiting, default=math.inf))

    @property
    def foreign(self) -> tuple[str, ...]:
        return tuple(sorted({name for state in self.states.values() for name in state.foreign}))

    def set_kill_switch(self, engaged: bool, note: str) -> None:
        """Set in each workload's state as it is judged; a row of its own."""
        if (engaged, note) != self._switch:
            self._switch = (engaged, note)
            self._dirty.add("switch|")

    def unanswered(self) -> list[Released]:
        """Its candidates let on and not answered yet, to send the second tier again: a
        restored first tier's. Its rows may have reached the broker and a record it sent
        with them not (a worker killed between the two): unsent, a workload would wait for
        its word for ever. (Sent twice, the second tier answers again what it answered.)"""
        return [
            Released(None, a.candidate.partition, None, onward=a) for a in self.admitted.values()
        ]

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

    def _judge(self, record: Wire, at: float) -> list[Released]:
        """A candidate in time order, at the guard's clock (as one guard judges it); it
        waits, at that time, while its workload's last one waits for the second tier."""
        assert isinstance(record, Candidate)
        workload = workload_key(record.decision)
        if workload not in self.admitted:
            if record.once and record.decision.incident in self.told:
                return []  # told already, by another partition: as if never said
            self._advance(at)
            return self._admit(record, self.clock, workload)
        self._advance(at)
        self.blocked.setdefault(workload, []).append((self.clock, encode(record)))
        self._dirty.add(f"blocked|{workload}")
        return []

    def _admit(self, record: Candidate, now: float, workload: str) -> list[Released]:
        """The workload tier (`Guard.admit`) at `now`: held here, or on to the second."""
        if record.once and record.decision.incident in self.told:
            return []
        weighed = self.history.weigh(record)
        with self._state_of(workload):
            self.guard.set_behind(record.behind or None)
            held = self.guard.admit(weighed, now)
        if held is not None:
            return [Released(held[0], record.partition, held[1])]
        self.admissions += 1
        admitted = Admitted(weighed, now, self.index, self.admissions)
        self.admitted[workload] = admitted
        self._dirty |= {f"admitted|{workload}", "admissions|"}
        return [Released(None, record.partition, None, onward=admitted)]

    def _settled(self, settled: Settled) -> list[Released]:
        """The second tier's word on a workload's admitted candidate: recorded where it
        got through (`Guard.commit`), then the workload's next candidates go on."""
        workload, admitted = settled.workload, self.admitted.get(settled.workload)
        if admitted is None or not _answers(settled, admitted):
            return []  # read again (a restart, or passed in process): answered already
        del self.admitted[workload]
        self._dirty.add(f"admitted|{workload}")
        if settled.through:
            with self._state_of(workload):
                self.guard.commit(admitted.candidate, admitted.at)
            if admitted.candidate.once:
                self._tell(admitted.candidate.decision.incident)
        return self._unblock(workload)

    def _unblock(self, workload: str) -> list[Released]:
        queue, out = self.blocked.get(workload), []
        while queue and workload not in self.admitted:
            now, raw = queue.pop(0)
            out.extend(self._admit(decode(raw, Candidate), now, workload))
        if queue is not None:
            self._dirty.add(f"blocked|{workload}")
            if not queue:
                del self.blocked[workload]
        return out

    @contextmanager
    def _state_of(self, workload: str) -> Iterator[None]:
        """The guard judges on `workload`'s state (the kill switch as last set); a row
        when it changed."""
        was = self.guard.state = self.states.get(workload, self._fresh)
        if self._switch is not None:
            self.guard.set_kill_switch(*self._switch)
        yield
        if self.guard.state is not was:
            self.states[workload] = self.guard.state
            self._dirty.add(f"state|{workload}")
        self.guard.state = self._fresh

    # ---- the table: the guard core's rows, and a row per workload ----------------------
    def changed(self) -> dict[str, Any]:
        mine = [k for k in self._dirty if k.startswith(_ROWS)]
        self._dirty.discard("state")
        rows = super().changed()
        for key in mine:
            kind, workload = key.split("|", 1)
            rows[key] = self._row(kind, workload)
        return rows

    def _row(self, kind: str, workload: str) -> Any:
        if kind == "admitted":
            admitted = self.admitted.get(workload)
            return None if admitted is None else encode(admitted).decode()
        if kind == "switch":
            return None if self._switch is None else list(self._switch)
        if kind == "admissions":
            return self.admissions
        if kind == "blocked":
            queue = self.blocked.get(workload)
            return [[at, raw.decode()] for at, raw in queue] if queue else None
        state = self.states.get(workload)
        return None if state is None else state.to_json()

    def to_json(self) -> str:
        self._dirty |= {f"admitted|{w}" for w in self.admitted}
        self._dirty |= {f"blocked|{w}" for w in self.blocked}
        self._dirty |= {f"state|{w}" for w in self.states} | {"switch|", "admissions|"}
        return super().to_json()

    @classmethod
    def from_rows(
        cls,
        config: PolicyFile,
        partitions: int,
        rows: dict[str, Any],
        verdicts: Verdicts | None = None,
        index: int = 0,
    ) -> Self:
        core = super().from_rows(config, partitions, rows, verdicts)
        core.index = index
        for key, value in rows.items():
            kind, _, workload = key.partition("|")
            if kind == "switch" and value is not None:
                core._switch = (bool(value[0]), str(value[1]))
            elif kind == "admissions" and value is not None:
                core.admissions = int(value)
            if value is None or not workload:
                continue
            if kind == "admitted":
                core.admitted[workload] = decode(value, Admitted)
            elif kind == "blocked":
                core.blocked[workload] = [(float(at), str(raw).encode()) for at, raw in value]
            elif kind == "state":
                core.states[workload] = core.guard.pipeline.load_state(value)
        return core


def _answers(settled: Settled, admitted: Admitted) -> bool:
    """Whether the second tier's word is on this admitted candidate."""
    incident = admitted.candidate.decision.incident
    return (settled.incident, settled.at, settled.seq) == (incident, admitted.at, admitted.seq)


@dataclass
class SecondTier(GuardCore):
    """The cluster tier of the guardrails over every first tier's admitted candidates (its
    `partitions`: the candidates topic's), in time order: what goes to the commands
    topic, the feedback for the deciders, and the `Settled` word back to the first tier.
    It keeps its last word to each workload (a row, `answered|<workload>`): a candidate
    sent again by a restored first tier is answered with it, not judged twice."""

    answered: dict[str, Settled] = field(default_factory=dict)

    def _learn(self, record: Learned, at: float) -> list[Released]:
        """The hedge budget's news, forwarded by the first tier: all it learns."""
        if record.gpus is not None:
            self.guard.hear(record.gpus, at)
            self._dirty.add("state")
        return []

    def _judge(self, record: Wire, at: float) -> list[Released]:
        assert isinstance(record, Admitted)
        candidate, workload = record.candidate, workload_key(record.candidate.decision)
        last = self.answered.get(workload)
        if last is not None and record.seq and record.seq <= last.seq:
            # Sent again by a restored first tier: its word again, if it is the last.
            if not _answers(last, record):
                return []  # an older one: answered, and its workload went on
            return [Released(None, candidate.partition, None, onward=last)]
        self._advance(at)
        before = self.guard.state
        (result, feedback), through = self.guard.settle(candidate, self.clock)
        self._touched(before)
        d = candidate.decision
        settled = Settled(workload, d.incident, record.at, through, record.seq)
        self.answered[workload] = settled
        self._dirty.add(f"answered|{workload}")
        return [Released(result, candidate.partition, feedback, onward=settled)]

    # ---- the table: the guard core's rows, and its last word to each workload ----------
    def changed(self) -> dict[str, Any]:
        mine = [k for k in self._dirty if k.startswith("answered|")]
        rows = super().changed()
        for key in mine:
            rows[key] = encode(self.answered[key.split("|", 1)[1]]).decode()
        return rows

    def to_json(self) -> str:
        self._dirty |= {f"answered|{w}" for w in self.answered}
        return super().to_json()

    @classmethod
    def from_rows(
        cls,
        config: PolicyFile,
        partitions: int,
        rows: dict[str, Any],
        verdicts: Verdicts | None = None,
    ) -> Self:
        core = super().from_rows(config, partitions, rows, verdicts)
        for key, value in rows.items():
            if key.startswith("answered|") and value is not None:
                core.answered[key.split("|", 1)[1]] = decode(value, Settled)
        return core
