"""Which partition key each raw input travels under, and how a body is cut into records.

Everything about one pod must land in one partition, or its timeline is split between
workers. The key is the pod's `namespace/name` for every pod-scoped input: the pod's
UID would be the natural key, but a kubelet Event, a first token or an alert may carry
only the name, and keying those by name while the Pod itself goes by UID would put
them in another partition. Pod names are unique among live pods (a StatefulSet pod
recreated under its name is the same partition, which the tracker needs to tell the
two lives apart).

Workloads are broadcast to every partition: the pods of a Deployment are spread over
all of them and each needs its replica count. Their image-update decision is kept by
one partition only (`owner`), so it is made once. So are a node's GPU-memory verdicts:
its pods are anywhere, and each partition needs to know the node is unsettled; what to
tell about the node (and whether to cordon it) is decided by one. A broadcast kind names
the key of its deciding partition where it is registered (`inputs.kinds.owner_key`).

A record's value is always a raw JSON document that `inputs.decode.decode` accepts;
a body whose inputs have different keys (an Alertmanager group about several pods, a
PodList) is cut into one document per key.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import orjson
from aiokafka.partitioner import murmur2

from remediator.contract.decision import Decision
from remediator.inputs.decode import decode
from remediator.inputs.kinds import BROADCAST, key_of, owner_key
from remediator.inputs.records import Input, InputError
from remediator.inputs.stamps import api_server_time
from remediator.runtime.clock import ClusterTime

# The partition key of each input kind is registered with the kind (inputs.kinds).
__all__ = [
    "BROADCAST",
    "NOW_HEADER",
    "Record",
    "arrived",
    "key_of",
    "owner",
    "owner_key",
    "partition_of",
    "split",
    "split_key",
]

# The cluster's time when the ingest took the record (ASCII seconds since the epoch).
NOW_HEADER = "remediator-now"


def partition_of(key: str, partitions: int) -> int:
    """The input partition of a pod's key: Kafka's default partitioner (murmur2, as
    the Java client and aiokafka hash a record's key), so a pod's records stay in the
    partition they went to when each was a record of its own."""
    hashed: int = murmur2(key.encode())
    return (hashed & 0x7FFFFFFF) % partitions


def owner(key: str, partitions: int) -> int:
    """The one partition that decides for a broadcast input (stable across processes)."""
    return zlib.crc32(key.encode()) % partitions


def command_key(decision: Decision) -> bytes:
    """A command's key on the commands topic: its incident, or the incident it is told
    under (`Decision.told_under`), so its row lands in the partition, and the worker, that
    holds that incident's act message to reply under (`RowStore.act_message`)."""
    return (decision.told_under or decision.incident).encode()


class Record:
    """One document for the input topic: its key, its raw bytes, and what it decodes to."""

    __slots__ = ("key", "value", "inputs")

    def __init__(self, key: str, value: bytes, inputs: list[Input]) -> None:
        self.key, self.value, self.inputs = key, value, inputs


def split(body: bytes) -> list[Record]:
    """Decode `body` whole (InputError refuses all of it), then cut it by key."""
    inputs = decode(body)
    if not inputs:
        return []
    keys = {key_of(i) for i in inputs}
    if len(keys) == 1:
        return [Record(keys.pop(), body, inputs)]
    return list(_cut(orjson.loads(body)))


def _cut(doc: Any) -> Iterator[Record]:
    if isinstance(doc, dict) and "specversion" in doc:
        data = doc.get("data")
        if isinstance(data, str | bytes):
            data = orjson.loads(data)
        if isinstance(data, dict) and isinstance(data.get("body"), dict | str):
            data = data["body"]  # Argo Events' webhook envelope
            if isinstance(data, str):
                data = orjson.loads(data)
        yield from _cut(data)  # the envelope only carried it: the document speaks for itself
        return
    if isinstance(doc, dict) and "alerts" in doc and "version" in doc:
        groups: dict[str, list[Any]] = {}
        for alert in doc["alerts"]:
            one = orjson.dumps({**doc, "alerts": [alert]})
            groups.setdefault(split_key(one), []).append(alert)
        for key, alerts in groups.items():
            part = orjson.dumps({**doc, "alerts": alerts})
            yield Record(key, part, decode(part))
        return
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        kind = str(doc.get("kind", ""))[: -len("List")] or None
        for item in doc["items"]:
            obj = {"kind": kind, **item} if kind and "kind" not in item else item
            part = orjson.dumps({"type": "ADDED", "object": obj})
            yield from split(part)
        return
    raise InputError("a document whose inputs span several pods and that cannot be cut")


def split_key(one: bytes) -> str:
    inputs = decode(one)
    return key_of(inputs[0]) if inputs else BROADCAST


def arrived(records: list[Record], cluster: ClusterTime) -> float | None:
    """The cluster's time as a body's `records` arrive, by serve's rule (`ClusterTime`,
    observed for the whole body first, as serve's driver does): the newest time the API
    server stamped on anything the ingest took, carried on by its monotonic clock. The
    ingest sees every input in order, as serve's driver does; a partition sees only its
    own, so its records carry this time (`NOW_HEADER`) and each input is applied at it:
    a pod's timer fires when one process's would, not when the next input of its own
    partition happens to come. None: no cluster time known yet."""
    for record in records:
        for item in record.inputs:
            cluster.observe(api_server_time(item))
    return cluster.now() if cluster.known else None
