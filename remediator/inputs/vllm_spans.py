"""vLLM's start-up spans → the engine-init steps they mark. Pure; unknown spans → nothing.

vLLM exports OpenTelemetry spans for its start-up (PR #31162, `vllm/tracing`: the
`@instrument(span_name=...)` decorator on the functions below), once an OTLP traces endpoint
is configured. Each span is exported when it ends, so a span says two things at once: where
the engine was when it began, and that the step ended when it ended. Read as the log's marks
(inputs.vllm_log), a span feeds the same steps as the log lines it stands for:

    span name        function it times                          begins           ends
    Load model       BaseModelLoader.load_model                 weights_started  weights
    Loading (GPU)    GPUModelRunner.load_model ("Model loading  weights_started  weights
                     took ..." is logged as it ends)
    Compile graph    CompilerManager.compile, one per graph     torch_compile_   torch_compile
                     piece and shape (the last one ends it)     started
    Allocate KV cache  Worker.initialize_from_config: the      kv_cache_        cuda_graphs_
                     cache is sized and allocated (0.27 on)     started          started
    Warmup (GPU)     Worker.compile_or_warm_up_model: the KV    cuda_graphs_     engine_ready
    (Compile/warmup  cache is allocated; graphs, warm-up        started
    before)
    Capture model    GPUModelRunner.capture_model (the V1       cuda_graphs_     cuda_graphs
                     runner's; the V2 runner, alone in 0.34,    started
                     has none: Warmup (GPU) ends its graphs)
    Prepare model    EngineCore._initialize_kv_caches ("init    —                engine_ready
                     engine (profile, create kv cache, warmup
                     model) took ..." is logged as it ends)
    Overall Loading  make_async_mp_client: the engine cores     —                engine_ready
                     are up

`engine_ready` ends cuda_graphs the way the log's `init engine ... took` line does, so an
`--enforce-eager` start (no graphs captured, no Capture model span) ends its last step too.
Spans vLLM times inside these (Load weights, Download weights - HF, Init device, Worker
init, ...) mark nothing: a step ends with its outermost span. vLLM calls its span set
unstable; a renamed span marks nothing here and the pod keeps its phase budget.
"""

from __future__ import annotations

from typing import NamedTuple

from remediator.inputs.records import EngineSpan, EngineStep
from remediator.inputs.vllm_log import (
    COMPILE_STARTED,
    ENGINE_READY,
    GRAPHS_STARTED,
    KV_CACHE_STARTED,
    WEIGHTS_STARTED,
)


class SpanMarks(NamedTuple):
    begins: str | None  # the mark its start stands for
    ends: str  # the mark (a step, or a mark that ends one) its end stands for
    measures: bool  # its duration is the step's whole time (vLLM's own measure of it)


SPANS: dict[str, SpanMarks] = {
    "Load model": SpanMarks(WEIGHTS_STARTED, "weights", True),
    "Loading (GPU)": SpanMarks(WEIGHTS_STARTED, "weights", True),
    "Compile graph": SpanMarks(COMPILE_STARTED, "torch_compile", False),
    "Allocate KV cache": SpanMarks(KV_CACHE_STARTED, GRAPHS_STARTED, False),
    "Warmup (GPU)": SpanMarks(GRAPHS_STARTED, ENGINE_READY, False),
    "Compile/warmup": SpanMarks(GRAPHS_STARTED, ENGINE_READY, False),
    "Capture model": SpanMarks(GRAPHS_STARTED, "cuda_graphs", True),
    "Prepare model": SpanMarks(None, ENGINE_READY, False),
    "Overall Loading": SpanMarks(None, ENGINE_READY, False),
}


def marks(span: EngineSpan) -> list[EngineStep]:
    """The step marks a span stands for, at its start and its end (none for a span that
    marks nothing)."""
    known = SPANS.get(span.name)
    if known is None:
        return []
    out = []
    if known.begins is not None:
        out.append(EngineStep(span.namespace, span.pod, span.uid, known.begins, None,
                              None, span.started))  # fmt: skip
    took = span.at - span.started if known.measures else None
    out.append(EngineStep(span.namespace, span.pod, span.uid, known.ends, took, None, span.at))
    return out
