"""The simulated cluster's objects: GPU nodes, Deployments, pods, and requested replicas.

Mutable on purpose (slots classes, no copies): the event loop updates them in place, and
they carry the ground truth beside what the API would show.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from mypy_extensions import i64

from remediator.inputs.hedge_annotation import Hedge
from remediator.sim.fleet.draws import PodDraws, times64
from remediator.sim.fleet.scenario import DeploymentSpec

_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet


class Node:
    __slots__ = ("name", "gpus", "free", "cordoned", "lost", "images", "unsettled", "alerted",
                 "pace")  # fmt: skip

    def __init__(self, name: str, gpus: int, unsettled: bool, pace: float = 1.0) -> None:
        self.name = name
        self.gpus = gpus
        self.free = gpus
        self.cordoned = False
        self.lost = False  # taken away by a GPU shortage
        self.images: dict[str, float] = {}  # image -> when it is (or will be) on the node
        self.unsettled = unsettled  # GPU memory never settles: engine init hangs here
        self.alerted = False
        self.pace = pace  # engine init here takes this many times as long (a slow node)

    @property
    def schedulable(self) -> bool:
        return not self.cordoned and not self.lost


class Slot:
    """One requested replica: a replacement counts for the replica it replaces."""

    __slots__ = ("id", "deployment", "requested", "ready", "first_token", "kills", "cancelled",
                 "pods", "live", "false_kills")  # fmt: skip

    def __init__(self, sid: int, deployment: str, requested: float) -> None:
        self.id = sid
        self.deployment = deployment
        self.requested = requested
        self.ready: float | None = None
        self.first_token: float | None = None
        self.kills = 0  # pods of this replica deleted by remediation
        self.false_kills = 0  # ... that would have become Ready
        self.cancelled = False  # scaled away or rolled over before it was Ready
        self.pods = 0  # pods made for it
        self.live: list[Pod] = []  # its pods alive now (two while hedged)


class Pod:
    __slots__ = ("uid", "name", "dep", "image", "rs_hash", "slot", "created", "node", "scheduled",
                 "pull_start", "pulled", "pull_reported", "started", "ready", "first_token",
                 "deleted", "fate", "would_ready", "pending_since", "unsched_sent", "removed_by",
                 "hedge", "hang_at", "index", "draws", "lines", "followed", "followed_at",
                 "statuses", "wire", "node_spec")  # fmt: skip

    def __init__(
        self, index: int, dep: Deployment, slot: Slot, created: float, fate: str, draws: PodDraws
    ) -> None:
        self.index = index
        self.uid = pod_uid(draws.u(0), index)
        self.dep = dep
        self.image = dep.image
        self.rs_hash = dep.rs_hash
        self.name = f"{dep.spec.name}-{dep.rs_hash}-{_suffix(index)}"
        self.slot = slot
        self.created = created
        self.node: Node | None = None
        self.scheduled: float | None = None
        self.pull_start: float | None = None
        self.pulled: float | None = None
        self.pull_reported: float | None = None  # the kubelet's "(Xs including waiting)"
        self.started: float | None = None
        self.ready: float | None = None
        self.first_token: float | None = None
        self.deleted: float | None = None
        self.fate = fate  # ok | init_hang | driver_hang
        self.would_ready: float | None = None  # ground truth: when it would have been Ready
        self.pending_since: float | None = None
        self.unsched_sent = False
        self.removed_by: str | None = None  # remediation | scale | rollout | hedge
        self.hedge = False  # started early beside a stalled pod
        self.hang_at: float | None = None  # when its progress signals stop
        self.draws: PodDraws = draws
        # its engine's start-up log: seconds from the container's start to each step's line
        # (the lines a hung engine writes before it hangs), and whether the log is followed
        self.lines: tuple[float, ...] = ()
        self.followed = False
        self.followed_at: float | None = None  # when its log was first read (tail stories)
        self.statuses: tuple[float, list[Any]] | None = None  # its engine's, as last written
        self.wire: tuple[Any, ...] | None = None  # what its records share (wire.pod_record)
        self.node_spec: tuple[str, Any] | None = None  # (node, its spec there), likewise

    @property
    def alive(self) -> bool:
        return self.deleted is None


class Deployment:
    __slots__ = ("spec", "image", "rs_hash", "desired", "pods", "generation", "uid", "rolling",
                 "old", "hedging", "hedge_notes")  # fmt: skip

    def __init__(self, spec: DeploymentSpec) -> None:
        self.spec = spec
        self.image = spec.image
        self.rs_hash = rs_hash(spec.name, spec.image)
        self.desired = spec.replicas
        self.pods: dict[str, Pod] = {}  # alive pods of the current ReplicaSet, by uid, oldest first
        self.old: dict[str, Pod] = {}  # alive pods of the previous ReplicaSet during a rollout
        self.generation = 1
        self.uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{spec.namespace}/{spec.name}"))
        self.rolling = False
        self.hedging: list[Pod] = []  # the stalled pods of the hedges running (one surge each)
        # The hedge step's annotation while they run: each one's entry, by stalled pod's uid.
        self.hedge_notes: dict[str, Hedge] = {}


def pod_uid(u: float, index: int) -> str:
    """A version-4 UUID string, cheaper than uuid.UUID (one per cold start): worked out on
    native integers (`draws.times64` for the one 64-bit product) and formatted at once (a
    format per field over big integers was a fifth of the simulator's cost of a new pod).
    `index` (the how-manieth pod) is under 2^31."""
    a: i64 = i64(int(u * _TWO_52)) ^ (i64(index) * 0x9E3779B1)
    hi, lo = times64(i64(index >> 32), i64(index & 0xFFFFFFFF), 0x85EBCA77, 0xC2B2AE63)
    lo += a & 0xFFFFFFFF  # b = index × 0x85EBCA77C2B2AE63 + a, mod 2^64, as hi·2^32 + lo
    hi = (hi + (a >> 32) + (lo >> 32)) & 0xFFFFFFFF
    lo &= 0xFFFFFFFF
    fields = (
        a >> 20 & 0xFFFFFFFF,
        a & 0xFFFF,
        0x4000 | (hi >> 20 & 0xFFF),  # b >> 52
        0x8000 | (hi >> 4 & 0x3FFF),  # b >> 36
        int(hi & 0xFFFF) << 32 | int(lo),  # b's low 48 bits
    )
    # (one call in C: a format spec per field is a method call per field)
    return "%08x-%04x-%04x-%04x-%012x" % fields  # noqa: UP031


_TWO_52: Final = float(1 << 52)


def rs_hash(name: str, image: str) -> str:
    n = uuid.uuid5(uuid.NAMESPACE_DNS, name + image).int
    return "".join(_SUFFIX[(n >> (5 * i)) % len(_SUFFIX)] for i in range(10))


def _suffix(index: int) -> str:
    """Five characters of `_SUFFIX`, the low digit first (one name per cold start)."""
    a, b = _SUFFIX, len(_SUFFIX)
    n = (index * 7_368_787 + 12_345) % b**5
    return a[n % b] + a[n // b % b] + a[n // b**2 % b] + a[n // b**3 % b] + a[n // b**4]


def node_name(i: int) -> str:
    return f"ip-10-{20 + i // 250}-{i % 250}-{17 + i % 200}.us-west-2.compute.internal"
