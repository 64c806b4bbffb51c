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

from remediator.policy.history import few_samples_margin
from tests.data import vllm_logs
from tests.live.harness import (
    NS,
    EngineLog,
    LiveCluster,
    Serve,
    container_started,
    example_deployment,
    policy,
    wait_for,
)
from tests.live.test_incidents import HANG, params, ready, workflows_of
from tests.standins.argo_server import ArgoStandin

# The phase budget for engine init is ten minutes; progress is on (it is off by default), and
# judges a step by two siblings' times, with a 5 s floor. Two siblings are few: the factor 2 is
# widened by few_samples_margin(2, 50), 2.44 (policy.history).
WIDENED = 2 * few_samples_margin(2, 50)
POLICY = policy(
    drop=["image_update"],
    stuck_pod={
        "budgets": {"engine_init": 600},
        "progress": {"enabled": True, "min_samples": 2, "factor": 2, "floor_s": 5},
    },
)


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


def one_more_hung(cluster: LiveCluster, doc: dict[str, Any], pods: list[dict[str, Any]],
                  sel: str, hang: str = "engine") -> dict[str, Any]:  # fmt: skip
    """Scale the workload to a third replica and make it hang (`hang`: where, as the kwok
    stages read it); give back that pod."""
    doc["spec"]["replicas"] = 3
    cluster.apply([doc])
    known = {p["metadata"]["uid"] for p in pods}
    new = lambda: [p for p in _pods(cluster, sel) if p["metadata"]["uid"] not in known]  # noqa: E731
    hung: dict[str, Any] = wait_for(new, 30, "the third pod")[0]
    patch = {"metadata": {"annotations": {HANG: hang}}}
    cluster.api("PATCH", f"/api/v1/namespaces/{NS}/pods/{hung['metadata']['name']}", patch,
                ctype="application/strategic-merge-patch+json")  # fmt: skip
    return hung


def _the_stall(argo: ArgoStandin, hung: dict[str, Any], step: str,
               timed_as: str) -> tuple[str, int, int, int]:  # fmt: skip
    """The one delete, of the hung pod, whose reason names the vLLM step it stalled in and the
    step that timed it: the reason, then the seconds stalled, the limit, the siblings'."""
    wf = wait_for(lambda: workflows_of(argo, "delete-stuck-inference-pod"), 60, "a delete")[0]
    assert (params(wf)["pod"], params(wf)["uid"]) == (hung["metadata"]["name"],
                                                      hung["metadata"]["uid"])  # fmt: skip
    reason = params(wf)["reason"]
    found = re.search(
        rf"engine_init stalled in vLLM step {step} \(timed as {timed_as}\) for (\d+)s, "
        r"over its (\d+)s limit for 1 checks in a row: 2 siblings of \S+ took (\d+)s there",
        reason,
    )
    assert found is not None, reason
    stalled_s, limit_s, siblings_s = map(int, found.groups())
    return reason, stalled_s, limit_s, siblings_s


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
    hung = one_more_hung(cluster, doc, pods, SEL)
    name = hung["metadata"]["name"]
    stalled = EngineLog(cluster, s, hung, LOG[:6]).start()
    wait_for(stalled.done, 60, "the hung pod's log up to its KV cache")

    # Which step stalled (the KV cache's allocation, timed by what graph capture took the
    # siblings: V1 logs nothing between), for how long, against what the siblings took.
    reason, stalled_s, limit_s, siblings_s = _the_stall(argo, hung, "kv_cache", "cuda_graphs")
    # ~2.5 s between the lines, as shipped (whole seconds in the reason): the 5 s floor or
    # the widened factor times the siblings' time
    assert 1 <= siblings_s <= 4 and 5 <= limit_s <= max(5, WIDENED * (siblings_s + 0.5) + 1)
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

    hung = one_more_hung(cluster, doc, pods, SPANS_SEL)
    stalled = EngineSpans(cluster, s, hung, SPANS[:5]).start()
    wait_for(stalled.done, 60, "the hung pod's spans up to its last compiled graph")

    # Spans say nothing of the memory profile's end: the stretch after the last compiled graph
    # is timed by what the siblings took to the KV cache's allocation (Capture model's start).
    reason, stalled_s, limit_s, siblings_s = _the_stall(argo, hung, "memory_profiling", "kv_cache")
    assert siblings_s <= 2 and 5 <= limit_s <= max(5, WIDENED * (siblings_s + 0.5) + 1)
    assert limit_s <= stalled_s < 600
    assert "over its 600s budget" not in reason
    assert len(workflows_of(argo, "delete-stuck-inference-pod")) == 1
    assert s.sample("remediator_otlp_spans_total", outcome="kept") == 2 * 6 + 4
