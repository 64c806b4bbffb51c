"""Progress-aware detection on the real control plane: a pod whose engine log stops at a step is
found by that step, long before its phase budget, and the decision says which step and how its
time compares with the siblings'. kwok plays the pods' starts (one hangs in engine init); their
vLLM lines are real ones (tests/data/vllm_logs), shipped to serve as they would be written; or
their start-up spans, sent by the real OpenTelemetry exporter to serve's /v1/traces."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.data import vllm_logs
from tests.live.harness import (
    NS,
    EngineLog,
    LiveCluster,
    Serve,
    container_started,
    example_deployment,
    wait_for,
)
from tests.live.test_incidents import HANG, params, ready, workflows_of
from tests.standins.argo_server import ArgoStandin

# The phase budget for engine init is ten minutes; progress is on (it is off by default), and
# judges a step by two siblings' times, with a 5 s floor.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm-inference]
  budgets: {scheduling: 4, image_pull: 60, container_start: 30, engine_init: 600}
  checks: 1
  check_interval_s: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
  progress: {enabled: true, min_samples: 2, factor: 2, floor_s: 5}
guardrails:
  cooldown: {seconds: 60}
  blast_radius: {max_pods: 2, max_percent: 100, window_s: 600, max_pods_cluster: 5}
"""


def _line(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


# A V1 start, seconds after the container started; kwok makes the pod Ready at 12 s.
LOG = [
    (0.5, _line("2025-04-v0.7-v0-profiling.log", "Starting to load model")),
    (2.0, _line("2025-11-v1-engine.log", "Model loading took")),
    (2.5, _line("2025-11-v1-engine.log", "Dynamo bytecode")),
    (4.0, _line("2025-11-v1-engine.log", "torch.compile takes")),
    (4.5, _line("2025-11-v1-engine.log", "Available KV cache memory")),
    (5.0, _line("2025-11-v1-engine.log", "GPU KV cache size")),
    (7.5, _line("2025-06-v1-api-server.log", "Graph capturing finished")),
    (8.0, _line("2025-06-v1-api-server.log", "init engine")),
    (8.5, _line("2025-06-v1-api-server.log", "Starting vLLM API server")),
    (9.0, "INFO:     Application startup complete."),
]
SHAPE = {"pull": "1s", "engine": "12s"}
SEL = "app.kubernetes.io/name=vllm-steps"


def _pods(cluster: LiveCluster, sel: str = SEL) -> list[dict[str, Any]]:
    return cluster.pods(NS, sel)


def test_a_pod_whose_log_stops_at_a_step_is_found_by_its_step_before_its_phase_budget(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    s = serve(policy=POLICY)
    doc = workloads(example_deployment("vllm-steps", replicas=2, shape=SHAPE))
    pods = wait_for(lambda: len(ps := _pods(cluster)) == 2 and ps, 30, "two pods")
    siblings = [EngineLog(cluster, s, p, LOG).start() for p in pods]
    wait_for(lambda: all(map(ready, _pods(cluster))) and len(_pods(cluster)) == 2, 60, "Ready")
    assert all(log.done() for log in siblings), "a sibling became Ready before its log ended"

    # One more replica; its engine hangs once it has sized its KV cache: its log stops there.
    doc["spec"]["replicas"] = 3
    cluster.apply([doc])
    known = {p["metadata"]["uid"] for p in pods}
    hung = wait_for(lambda: [p for p in _pods(cluster) if p["metadata"]["uid"] not in known],
                    30, "the third pod")[0]  # fmt: skip
    name, uid = hung["metadata"]["name"], hung["metadata"]["uid"]
    patch = {"metadata": {"annotations": {HANG: "engine"}}}
    cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}", patch,
                ctype="application/strategic-merge-patch+json")  # fmt: skip
    stalled = EngineLog(cluster, s, hung, LOG[:6]).start()
    wait_for(stalled.done, 60, "the hung pod's log up to its KV cache")

    wf = wait_for(lambda: workflows_of(argo, "delete-stuck-inference-pod"), 60, "a delete")[0]
    assert params(wf)["pod"] == name and params(wf)["uid"] == uid
    reason = params(wf)["reason"]
    # Which step stalled (the KV cache's allocation, timed by what graph capture took the
    # siblings: V1 logs nothing between), for how long, against what the siblings took.
    found = re.search(
        r"engine_init stalled in vLLM step kv_cache \(timed as cuda_graphs\) for (\d+)s, "
        r"over its (\d+)s limit for 1 checks in a row: 2 siblings of \S+ took (\d+)s there",
        reason,
    )
    assert found is not None, reason
    stalled_s, limit_s, siblings_s = map(int, found.groups())
    # ~2.5 s between the lines, as shipped (rounded in the reason): a limit of 5 s or just over
    assert 1 <= siblings_s <= 4 and 5 <= limit_s <= max(5, 2 * siblings_s + 1)
    assert limit_s <= stalled_s < 600  # by its step: far inside its 600 s phase budget
    assert "over its 600s budget" not in reason
    assert not ready(cluster.get(f"/api/v1/namespaces/{NS}/pods/{name}") or {})
    assert len(workflows_of(argo, "delete-stuck-inference-pod")) == 1  # no sibling touched


# The same start as vLLM's OpenTelemetry start-up spans (name, start, end: seconds after the
# container started), each exported by vLLM's exporter when it ends.
SPANS = [
    ("Init device", 0.2, 0.4),
    ("Load model", 0.5, 2.0),
    ("Compile graph", 2.5, 3.0),
    ("Compile graph", 3.0, 3.5),
    ("Compile graph", 3.5, 4.0),
    ("Capture model", 5.0, 7.5),
    ("Prepare model", 2.2, 8.0),
]
SPANS_SEL = "app.kubernetes.io/name=vllm-spans"


@dataclass
class EngineSpans:
    """One pod's vLLM, exporting its start-up spans to serve's /v1/traces with the real OTLP
    exporter (http/protobuf, gzip, the webhook token), the pod named in its resource as
    OTEL_RESOURCE_ATTRIBUTES from the downward API names it."""

    live: LiveCluster
    serve: Serve
    pod: dict[str, Any]
    spans: list[tuple[str, float, float]]
    exported: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def start(self) -> EngineSpans:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def _run(self) -> None:
        meta = self.pod["metadata"]
        attrs = {"k8s.namespace.name": NS, "k8s.pod.name": meta["name"], "k8s.pod.uid": meta["uid"]}
        resource = Resource.create({"service.name": "vllm.server", **attrs})
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{self.serve.port}/v1/traces",
            headers={"Authorization": f"Bearer {self.serve.webhook_token}"},
            compression=Compression.Gzip,
            timeout=10,
        )
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("vllm.v1.worker.gpu_worker")
        try:
            started = wait_for(lambda: container_started(self.live, meta["name"]), 60, "start")
            for name, a, b in sorted(self.spans, key=lambda s: s[2]):
                time.sleep(max(0.0, started + b - time.time()))
                span = tracer.start_span(name, start_time=int((started + a) * 1e9))
                span.end(end_time=int((started + b) * 1e9))  # exported as it ends
                self.exported.append(name)
        except Exception as exc:  # reported by done(), in the test's thread
            self.errors.append(repr(exc))
        finally:
            provider.shutdown()

    def done(self) -> bool:
        if self.errors:
            raise AssertionError(f"exporting spans failed: {self.errors}")
        return len(self.exported) == len(self.spans)


def test_a_pod_whose_spans_stop_at_a_step_is_found_by_its_step(
    cluster: LiveCluster,
    serve: Callable[..., Serve],
    argo: ArgoStandin,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """The same, from vLLM's spans alone: the replica's spans stop once it has compiled."""
    s = serve(policy=POLICY)
    doc = workloads(example_deployment("vllm-spans", replicas=2, shape=SHAPE))
    pods = wait_for(lambda: len(ps := _pods(cluster, SPANS_SEL)) == 2 and ps, 30, "two pods")
    siblings = [EngineSpans(cluster, s, p, SPANS).start() for p in pods]
    wait_for(lambda: all(map(ready, ps := _pods(cluster, SPANS_SEL))) and len(ps) == 2, 60,
             "Ready")  # fmt: skip
    assert all(e.done() for e in siblings), "a sibling became Ready before its spans ended"

    doc["spec"]["replicas"] = 3
    cluster.apply([doc])
    known = {p["metadata"]["uid"] for p in pods}
    new = lambda: [p for p in _pods(cluster, SPANS_SEL) if p["metadata"]["uid"] not in known]  # noqa: E731
    hung = wait_for(new, 30, "the third pod")[0]
    name, uid = hung["metadata"]["name"], hung["metadata"]["uid"]
    patch = {"metadata": {"annotations": {HANG: "engine"}}}
    cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}", patch,
                ctype="application/strategic-merge-patch+json")  # fmt: skip
    stalled = EngineSpans(cluster, s, hung, SPANS[:5]).start()
    wait_for(stalled.done, 60, "the hung pod's spans up to its last compiled graph")

    wf = wait_for(lambda: workflows_of(argo, "delete-stuck-inference-pod"), 60, "a delete")[0]
    assert params(wf)["pod"] == name and params(wf)["uid"] == uid
    reason = params(wf)["reason"]
    # Spans say nothing of the memory profile's end: the stretch after the last compiled graph
    # is timed by what the siblings took to the KV cache's allocation (Capture model's start).
    found = re.search(
        r"engine_init stalled in vLLM step memory_profiling \(timed as kv_cache\) for (\d+)s, "
        r"over its (\d+)s limit for 1 checks in a row: 2 siblings of \S+ took (\d+)s there",
        reason,
    )
    assert found is not None, reason
    stalled_s, limit_s, siblings_s = map(int, found.groups())
    assert siblings_s <= 2 and limit_s == 5 and limit_s <= stalled_s < 600
    assert "over its 600s budget" not in reason
    assert len(workflows_of(argo, "delete-stuck-inference-pod")) == 1
    assert s.sample("remediator_otlp_spans_total", outcome="kept") == 2 * 6 + 4
