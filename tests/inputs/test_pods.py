"""Pods: the real v1.31 PodList, and what the spec says about the engine."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.pods import engine_run, spec_info
from remediator.inputs.records import InputError, PodSeen
from remediator.inputs.schema import PodSpec
from remediator.inputs.timefmt import parse_time
from tests.data import CAPTURES
from tests.timeline.streams import MODEL, NODE, UID, at, pod, watch

K8S = CAPTURES / "k8s"


def test_real_podlist() -> None:
    items = decode((K8S / "podlist_redis_statefulset_k8s-v1.31_minikube.json").read_bytes())
    pods = {p.name: p for p in items if isinstance(p, PodSeen)}
    assert len(items) == len(pods) == 2
    r0, r1 = pods["redis-0"], pods["redis-1"]
    assert r0.uid == "5c3d5e63-5fb6-4545-aa5b-a52d0f9b0016"
    assert (r0.namespace, r0.node, r0.phase) == ("default", "minikube", "Running")
    assert engine_run(r0.statuses, "redis").restarts == 0
    assert r0.created == parse_time("2024-11-17T11:08:53Z")
    assert r0.scheduled == parse_time("2024-11-17T11:08:53Z")
    assert engine_run(r0.statuses, "redis").started == parse_time("2024-11-17T11:08:57Z")
    assert r0.ready == parse_time("2024-11-17T11:08:58Z")
    assert r0.owner == "StatefulSet/redis"
    # The clock goes to the latest time the object carries: Ready / PodReadyToStartContainers.
    assert r0.at == parse_time("2024-11-17T11:08:58Z")
    assert r1.uid == "216570cd-df52-4306-a4fc-8910b18327f4"
    assert r1.scheduled == parse_time("2024-11-17T10:40:06Z")
    assert engine_run(r1.statuses, "redis").first_started == parse_time("2024-11-17T10:40:09Z")
    assert r1.ready == parse_time("2024-11-17T10:40:10Z")
    # redis has no GPU and no --model: the first container is the main one.
    info = spec_info(r0.spec, r0.labels)
    assert (info.container, info.image, info.gpus, info.model) == ("redis", "redis:latest", 0, None)


def test_pod_without_conditions_is_pending_not_an_error() -> None:
    (p,) = decode(orjson.dumps(watch(pod(conditions=False), "ADDED")))
    assert isinstance(p, PodSeen)
    assert (p.scheduled, p.ready, p.unschedulable) == (None, None, None)
    assert engine_run(p.statuses, "vllm").started is None
    assert p.at == p.created == parse_time(at(0))


def test_unschedulable_condition() -> None:
    doc = pod()
    doc["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            "lastTransitionTime": at(1),
        }
    ]
    (p,) = decode(orjson.dumps(doc))
    assert isinstance(p, PodSeen)
    assert p.scheduled is None
    assert p.unschedulable == "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def test_main_container_is_the_gpu_one() -> None:
    (p,) = decode(orjson.dumps(pod(scheduled=12, started=289, restarts=3)))
    assert isinstance(p, PodSeen)
    info = spec_info(p.spec, p.labels)
    assert (info.container, info.gpus) == ("vllm", 2)  # not the sidecar listed first
    assert engine_run(p.statuses, info.container).restarts == 3
    assert p.node == NODE
    assert p.uid == UID


@pytest.mark.parametrize(
    ("command", "args", "labels", "model", "tp", "util"),
    [
        (None, ["--model", "m/a", "--tensor-parallel-size", "2"], {}, "m/a", "2", None),
        (None, ["--model=m/b", "--tensor-parallel-size=4", "--gpu-memory-utilization=0.9"], {},
         "m/b", "4", "0.9"),
        (["vllm", "serve", "m/c"], ["--tensor-parallel-size", "2"], {}, "m/c", "2", None),
        (["vllm"], ["serve", "m/d", "-tp", "8"], {}, "m/d", "8", None),
        (["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", MODEL],
         {"model": "from-label"}, MODEL, None, None),  # the arg wins over the label
        (None, ["--port", "8000"], {"model": "from-label"}, "from-label", None, None),
        (None, [], {"app.kubernetes.io/model": "akm"}, "akm", None, None),
        (None, [], {"remediator.io/model": "rim"}, "rim", None, None),
        (None, ["--gpu-memory-utilization", "0.95"], {}, None, None, "0.95"),
        (["vllm", "serve", "--model", "m/e"], [], {}, "m/e", None, None),
    ],
)  # fmt: skip
def test_engine_from_spec(
    command: list[str] | None,
    args: list[str],
    labels: dict[str, str],
    model: str | None,
    tp: str | None,
    util: str | None,
) -> None:
    doc = pod(args=args, command=command, labels=labels)
    info = spec_info(msgspec.convert(doc["spec"], PodSpec), doc["metadata"]["labels"])
    assert (info.model, info.tp_size, info.gpu_util) == (model, tp, util)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("metadata"),
        lambda d: d["metadata"].pop("uid"),
        lambda d: d["metadata"].pop("name"),
        lambda d: d["metadata"].update(creationTimestamp="1 Jan"),
        lambda d: d["status"].update(conditions=[{"type": "Ready", "lastTransitionTime": 5}]),
        lambda d: d["status"].update(conditions="yes"),
    ],
)
def test_bad_pods_are_input_errors(mutate: Any) -> None:
    doc = pod(scheduled=12)
    mutate(doc)
    with pytest.raises(InputError):
        decode(orjson.dumps(watch(doc)))
