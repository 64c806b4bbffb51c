"""The records that cross the core's public boundary (and, on Kafka, a process).

    decider ──Candidate──▶ guard ──Decision | Suppressed──▶ runtime (outbox, Slack)
       ▲                     │
       └──── Feedback ───────┘   GotThrough: acted or dry run, the same record
                                 RetryAt:    a guardrail's "not yet", look again then
                                             (`sooner`: min_age's estimate dropped)
                                 HeldBehind: held while the picture may lag the
                                             cluster's; looked at again once caught up

A candidate is a decision before the guardrails, with the time it was made at. Whatever
the guard lets through, live or dry, goes back to the decider as `GotThrough`: that is
how the kill-loop guard learns that a pod of a workload was deleted, and it is the same
record for a dry run, so a dry run decides exactly what a live run would. `Learned` is a
finished cold start's phase durations, for a guard that weighs decisions by history it
did not see itself (one per cluster over many partitions). `Aging` is a hold the guard
looks out for until the estimate it was made by drops (the Kafka guard stores them).

All are msgspec structs tagged by `type`, so `contract.codec` reads any of them back
from one union. `Envelope` is the Kafka runtime's input-topic record: many raw input
documents bound for one partition in one record (`streams.ingest` packs them).
"""

from __future__ import annotations

import msgspec

from remediator.contract.decision import Decision


class Candidate(msgspec.Struct, frozen=True, tag="candidate"):
    """A decision the rules made at `at`, before the guardrails. `model`: the target
    pod's model (a guard over many partitions weighs its cold start by it). `phase`: the
    phase a pod deletion was decided in (the kill-loop guard's key, with the workload).
    `once`: a notice the rules tell once per cause (a budget that looks too tight), which
    a guard over many deciders lets through once per incident for all of them.
    `behind`: why the decider's picture may lag the cluster's as it decided (its watch
    relisting or silent), "" when current: a guard in another process holds pod
    deletions on it (guard/watch_current.py), as one process holds on its runtime's word."""

    decision: Decision
    at: float
    partition: int = 0
    model: str | None = None
    phase: str | None = None
    once: bool = False
    behind: str = ""


class GotThrough(msgspec.Struct, frozen=True, tag="got_through"):
    """The guard let `decision` through at `at`: acted, or (dry) would have. `phase`:
    the candidate's, so every decider holding pods of the workload remembers it."""

    decision: Decision
    at: float
    dry: bool = False
    partition: int = 0
    phase: str | None = None


class RetryAt(msgspec.Struct, frozen=True, tag="retry_at"):
    """A guardrail said "not yet" at `at`: look at it again no sooner than `not_before`;
    `queued`: exactly then, where a place is kept for it (`Suppressed.queued`).
    `sooner`: not a new "not yet" but an earlier look at a pod held until it is as old as
    its model's expected cold start, now that the estimate has dropped (`Guard.reweigh`):
    taken only where it is sooner than the pod's timer."""

    decision: Decision
    at: float
    not_before: float
    partition: int = 0
    queued: bool = False
    sooner: bool = False


class Aging(msgspec.Struct, frozen=True, tag="aging"):
    """A pod deletion `guardrail` holds until the pod is as old as its `model`'s expected
    cold start (min_age), as the guard remembers it: looked at again sooner should the
    estimate drop (`Guard.reweigh`)."""

    retry: RetryAt
    model: str
    guardrail: str


class HeldBehind(msgspec.Struct, frozen=True, tag="held_behind"):
    """A pod deletion held at `at` because the picture may lag the cluster's: the decider
    looks at the pod again the moment its picture has caught up (not a check later)."""

    decision: Decision
    at: float
    partition: int = 0


Feedback = GotThrough | RetryAt | HeldBehind


class GpuNews(msgspec.Struct, frozen=True):
    """What a decider saw that the guard weighs hedges by (guard.hedge_budget), with
    hedging on: the GPU-seconds cold starts held, scheduled to Ready or to their end
    unready (what pays for hedges), the workloads short of GPUs: (workload, seen at, short
    until), the hedged pods whose stall ended (Ready, deleted, gone): (pod uid, when it was
    seen), which of those ended deleted (their hedge pod is their replacement: nothing of
    the hedge is left to delete; a release before sent none, and its hedges settle as Ready
    ones), and of those ended, when a new pod was first seen racing each (the hedge step's
    annotation: it had a node; where none was, or a release before sent none, the hedge is
    settled from its decision), and the hedged pods whose racer's decider saw it gone (failed,
    deleted: its GPUs free), with when: a hedge its stalled pod won holds GPUs until then.
    `racer_scheduled`: of those raced, when that racer was scheduled, as the hedge step's
    annotation says (its PodScheduled condition: the same in every partition; none from a
    release before), from which the hedge is settled with no slack for the step's poll and
    the watch."""

    gpu_s: float = 0.0
    short: tuple[tuple[str, float, float], ...] = ()
    ended: tuple[tuple[str, float], ...] = ()
    replaced: tuple[str, ...] = ()
    raced: tuple[tuple[str, float], ...] = ()
    racer_gone: tuple[tuple[str, float], ...] = ()
    racer_scheduled: tuple[tuple[str, float], ...] = ()


class Learned(msgspec.Struct, frozen=True, tag="learned"):
    """Finished cold starts' phase durations: (model, phase, seconds); and what the guard
    weighs hedges by (`gpus`), heard by the guard alone."""

    at: float
    partition: int
    samples: tuple[tuple[str, str, float], ...]
    gpus: GpuNews | None = None
    # Where in its partition it was taught: (input-topic offset, place at that offset). A
    # partition rebuilt after its worker died sends again what it made from records the
    # dead worker may have sent on already; the guard hears each place once.
    source: tuple[int, int] | None = None


class Watermark(msgspec.Struct, frozen=True, tag="watermark"):
    """Every candidate of `partition` at or before `at` has been emitted."""

    partition: int
    at: float


class Admitted(msgspec.Struct, frozen=True, tag="admitted"):
    """A candidate the guard's first tier (candidates partition `tier`) let on at `at`, for
    the second tier to settle (`Guard.admit`, then `Guard.settle`): the guard split by
    workload (streams/tiers.py). `seq` numbers the first tier's admissions: the second
    tier's word names it back (0: a worker before it)."""

    candidate: Candidate
    at: float
    tier: int
    seq: int = 0


class Settled(msgspec.Struct, frozen=True, tag="settled"):
    """The second tier's word on an admitted candidate, back to its workload's first-tier
    partition: `through` (let through, or a dry run's "would have"): `Guard.commit` there.
    `incident`, `at` and `seq` name the admitted candidate it answers: a word read again
    (after a restart, or once passed in process and once from the topic) answers nothing,
    even where the workload's next candidate has the same incident and time."""

    workload: str
    incident: str
    at: float
    through: bool
    seq: int = 0


class Packed(msgspec.Struct, frozen=True, array_like=True):
    """One input-topic document as an `Envelope` carries it: its partition key, the
    cluster's time the ingest took it at (None: not known yet) and the document itself,
    byte for byte (a raw JSON document `inputs.decode` reads, or a tick)."""

    key: str
    at: float | None
    raw: msgspec.Raw


class Envelope(msgspec.Struct, frozen=True, tag="inputs", tag_field="remediator"):
    """Many documents bound for one input partition, in order, as one Kafka record: the
    broker's and the consumer's cost is per record, not per input. Written as
    `{"remediator":"inputs","records":[[key, at, document], ...]}`."""

    records: list[Packed]
