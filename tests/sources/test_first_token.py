"""The first-token probe against a stand-in vLLM server on loopback (no GPU here, and the
stand-in injects what a real one will not on demand: a slow first token, an error, silence)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from remediator.inputs.records import FirstToken, Input
from remediator.policy.config import FirstTokenProbeConfig
from remediator.sources.first_token import FirstTokenProber, ProbeMetrics
from remediator.timeline import Tracker, timelines_from
from remediator.timeline.model import PodTimeline
from tests.standins.vllm_server import VllmStandin

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
SERVED = "llama-70b"


def ready_pod(name: str, port: int, served: str | None = SERVED) -> dict[str, Any]:
    args = ["--model", MODEL, "--port", str(port)]
    if served:
        args += ["--served-model-name", served]
    return {
        "type": "ADDED",
        "object": {
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "llm",
                "uid": f"uid-{name}",
                "creationTimestamp": "2025-03-01T12:00:00Z",
            },
            "spec": {
                "containers": [
                    {"name": "sidecar", "image": "busybox"},
                    {
                        "name": "vllm",
                        "args": args,
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    },
                ]
            },
            "status": {
                "phase": "Running",
                "podIP": "127.0.0.1",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "True",
                        "lastTransitionTime": "2025-03-01T12:00:01Z",
                    },
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": "2025-03-01T12:04:00Z",
                    },
                ],
                "containerStatuses": [
                    {"name": "vllm", "state": {"running": {"startedAt": "2025-03-01T12:01:00Z"}}}
                ],
            },
        },
    }


def pods(*docs: dict[str, Any]) -> list[PodTimeline]:
    tracker: Tracker = timelines_from([orjson.dumps(d) for d in docs])
    return list(tracker)


class Got:
    def __init__(self) -> None:
        self.inputs: list[Input] = []

    def __call__(self, inputs: list[Input]) -> None:
        self.inputs.extend(inputs)


def prober(got: Got, **cfg: Any) -> tuple[FirstTokenProber, CollectorRegistry]:
    registry = CollectorRegistry()
    settings = FirstTokenProbeConfig(enabled=True, **cfg)
    return FirstTokenProber(settings, got, ProbeMetrics.on(registry)), registry


async def drive(
    p: FirstTokenProber, ts: list[PodTimeline], until: Callable[[], bool], s: float = 20
) -> None:
    """What the service's observer does: sync about every tick, until `until()`."""
    deadline = time.monotonic() + s
    while not until():
        assert time.monotonic() < deadline, "probe did not finish"
        p.sync(ts)
        await asyncio.sleep(0.05)


def count(registry: CollectorRegistry, result: str) -> float:
    return (
        registry.get_sample_value("remediator_first_token_probes_total", {"result": result}) or 0.0
    )


async def test_slow_first_token_is_recorded_and_confirmed_by_vllms_metric() -> None:
    with VllmStandin(model=SERVED, first_token_s=0.4) as vllm:
        got = Got()
        p, registry = prober(got)
        ts = pods(ready_pod("vllm-0", vllm.port))
        sent = time.time()
        await drive(p, ts, lambda: bool(got.inputs))
        await p.close()
    (ft,) = got.inputs
    assert isinstance(ft, FirstToken) and (ft.namespace, ft.pod, ft.uid) == (
        "llm",
        "vllm-0",
        "uid-vllm-0",
    )
    assert ft.at - sent >= 0.4  # the first token came after the stand-in's delay
    answer = p.answers["uid-vllm-0"]
    assert answer.first_token - answer.sent >= 0.4
    # the engine's own TTFT (the stand-in's histogram) confirms the probe's
    assert (
        answer.engine_ttft_s is not None
        and 0.4 <= answer.engine_ttft_s <= answer.first_token - answer.sent
    )
    (body,) = vllm.requests
    assert body == {
        "model": SERVED,
        "prompt": "Hello",
        "max_tokens": 1,
        "stream": True,
        "temperature": 0,
    }
    assert vllm.problems == [] and count(registry, "ok") == 1


async def test_the_policy_names_the_model_and_path_when_the_pod_does_not() -> None:
    with VllmStandin(model="from-policy") as vllm:
        got = Got()
        p, _ = prober(got, model="from-policy", path="/v1/completions")
        await drive(p, pods(ready_pod("vllm-0", vllm.port, served=None)), lambda: bool(got.inputs))
        await p.close()
    assert vllm.requests[0]["model"] == "from-policy"


async def test_an_error_is_retried_then_given_up_and_closes_nothing() -> None:
    with VllmStandin(model=SERVED, mode="error") as vllm:
        got = Got()
        p, registry = prober(got, attempts=3, retry_s=0.1)
        await drive(
            p, pods(ready_pod("vllm-0", vllm.port)), lambda: count(registry, "gave_up") == 1
        )
        await asyncio.sleep(0.3)
        p.sync(pods(ready_pod("vllm-0", vllm.port)))  # given up: never asked again
        await p.close()
    assert got.inputs == [] and len(vllm.requests) == 3
    assert count(registry, "http_error") == 3


async def test_no_answer_times_out() -> None:
    with VllmStandin(model=SERVED, mode="silent") as vllm:
        got = Got()
        p, registry = prober(got, timeout_s=0.3, attempts=1)
        await drive(
            p, pods(ready_pod("vllm-0", vllm.port)), lambda: count(registry, "gave_up") == 1
        )
        await p.close()
    assert got.inputs == [] and count(registry, "timeout") == 1


async def test_nothing_listening_is_refused() -> None:
    with VllmStandin(model=SERVED) as vllm:
        port = vllm.port
    got = Got()
    p, registry = prober(got, attempts=1, timeout_s=2)
    await drive(p, pods(ready_pod("vllm-0", port)), lambda: count(registry, "gave_up") == 1)
    await p.close()
    assert got.inputs == [] and count(registry, "refused") == 1


async def test_never_more_than_max_concurrent_probes() -> None:
    with VllmStandin(model=SERVED, first_token_s=0.3) as vllm:
        got = Got()
        p, _ = prober(got, max_concurrent=2)
        ts = pods(*(ready_pod(f"vllm-{i}", vllm.port) for i in range(6)))
        await drive(p, ts, lambda: len(got.inputs) == 6)
        await p.close()
    assert vllm.max_in_flight == 2
    assert sorted(i.pod for i in got.inputs if isinstance(i, FirstToken)) == [
        f"vllm-{i}" for i in range(6)
    ]
