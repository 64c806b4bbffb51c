"""The input kinds' registry: every record kind is registered once, with its key and
whether the cluster stamped it; an unregistered kind is routed, never a crash."""

from __future__ import annotations

import typing

import msgspec

from remediator.inputs.kinds import (
    BROADCAST,
    DECODERS,
    KINDS,
    cluster_stamped,
    key_of,
    owner_key,
)
from remediator.inputs.records import (
    AlertSeen,
    EngineSpan,
    FirstToken,
    GpuVerdict,
    Input,
    PodEvent,
    PodSeen,
)


def test_every_input_record_is_registered() -> None:
    assert set(typing.get_args(Input)) == set(KINDS)


def test_the_cluster_stamped_kinds_are_the_api_servers_and_kubelets() -> None:
    stamped = {k.record.__name__ for k in KINDS.values() if k.cluster_stamped}
    assert stamped == {"PodSeen", "PodEvent", "WorkloadSeen", "Relisted"}


def test_every_document_kind_decodes_through_its_registration() -> None:
    assert {"Pod", "Event", "Deployment", "StatefulSet", "DaemonSet", "FirstToken",
            "GpuMemoryVerdict", "EngineLog", "EngineSpan"} == set(DECODERS)  # fmt: skip


class Novel(msgspec.Struct, frozen=True):
    at: float | None = None


def test_an_unregistered_kind_has_a_key_and_is_not_the_clusters() -> None:
    item = typing.cast(Input, Novel(1.0))
    assert key_of(item) == "unregistered/Novel"
    assert not cluster_stamped(item)


def test_keys_keep_a_pod_in_one_partition() -> None:
    token = FirstToken("llm", "vllm-0", None, 1.0)
    span = EngineSpan("llm", "vllm-0", None, "Load model", 0.5, 1.0)
    verdict = GpuVerdict("gpu-1", False, "", None, 1.0)
    alert = AlertSeen("firing", "Stuck", {"namespace": "llm", "pod": "vllm-0"}, {}, None, None,
                      "fp", "g", None)  # fmt: skip
    assert key_of(token) == key_of(alert) == key_of(span) == "llm/vllm-0"
    assert not cluster_stamped(span)  # the node's clock, as a log line's
    # A node's pods are in every partition: its verdict goes to all, decided for by one.
    assert key_of(verdict) == BROADCAST and owner_key(verdict) == "node/gpu-1"
    assert owner_key(token) is None
    assert not cluster_stamped(token) and not cluster_stamped(alert)
    assert KINDS[PodSeen].cluster_stamped and KINDS[PodEvent].cluster_stamped
    assert BROADCAST == "*"


def test_the_api_servers_time_is_read_by_the_kinds_registration() -> None:
    """`inputs.stamps` dispatches on the registry: a kind that registered no `stamped`
    (an alert, a first token) or none at all never moves the runtime's clock."""
    from remediator.inputs.stamps import api_server_time

    token = FirstToken("llm", "vllm-0", None, 1.0)
    assert api_server_time(token) is None and KINDS[FirstToken].stamped is None
    assert api_server_time(typing.cast(Input, Novel(5.0))) is None
    event = PodEvent("ADDED", "u1", "llm", "vllm-0", "Pulled", "", "vllm", False,
                     first=9.0, last=9.5, count=1, created=3.0, at=9.5)  # fmt: skip
    assert api_server_time(event) == 3.0  # its creation, never the kubelet's first/last
