"""vLLM's start-up log lines → the engine-init step each one ends. Pure; unknown lines → None.

The forms are vLLM's own `logger.info` calls, across releases (see tests/data/vllm_logs):

    weights           Loading model weights took 1.5874 GB                      (≤0.6, V0)
                      Model loading took 7.6785 GiB and 2.195456 seconds         (V1)
                      Model loading took 2.0513 GiB memory and 27.200487 seconds (≥0.11.1)
    torch_compile     graph compilation takes 14.73 s in total                   (0.6.5)
                      torch.compile takes 19.69 s in total                       (0.7 … 0.11)
                      torch.compile took 54.60 s in total                        (≥0.12)
    memory_profiling  Memory profiling takes 34.26 seconds                       (V0; "took" too)
                      Initial profiling/warmup run took 107.62 s                 (≥0.19)
                      Available KV cache memory: 33.31 GiB  (negative when it does not fit)
                      ... reserved 0.73 GiB memory for KV Cache as specified by
                      kv_cache_memory_bytes config and skipped memory profiling (V1, with
                      --kv-cache-memory-bytes or 0.34's startup plan: no profiling to time)
    cuda_graphs       Graph capturing finished in 37 secs, took 0.45 GiB        ("secs." ≤0.5)
    api_server        Application startup complete.  (uvicorn, after "Starting vLLM API server")

A step is the time from the previous step's line (or the container's start) to its own line.
Some lines say where the engine is rather than that a step of its own ended; each of them ends
the step before it:

    KV_CACHE_STARTED  # GPU blocks: 7191, # CPU blocks: 512   (# cuda blocks: in 0.8 V0)
                      GPU KV cache size: 1,587,648 tokens    (V1)
        printed once the cache is sized, as it is allocated: memory_profiling has ended and
        kv_cache begins (an out-of-memory crash after it is the cache's, not CUDA graphs').
    GRAPH_MEMORY      Profiling CUDA graph memory: PIECEWISE=16 (largest=16) / Estimated CUDA
                      graph memory: 0.36 GiB total (V1, 0.18 on, after the profiling run's line
                      and before the cache is sized): the engine captures a few graphs to
                      measure their memory, still profiling memory (it ends no step).
    KV_CACHE_EXTENDED Extended KV cache to 12345 blocks (10.00 GiB). / Remapping the KV cache
                      from %d to %d blocks ... (0.34's extensible KV cache, after the capture,
                      as "GPU KV cache size" is then): the cache is grown to its final size;
                      the engine is still in the stretch `init engine ... took` ends.
    GRAPHS_STARTED    Capturing cudagraphs for decoding. ...  / Capturing the model for CUDA
                      graphs. ...  (V0): the cache is allocated, graph capture begins.
    ENGINE_READY      init engine (profile, create kv cache, warmup model) took 25.99 seconds
                      (≥0.6.5; "took 163.91 s (compilation: 54.58 s)" from 0.19): the
                      engine's init is over, the last step before the API server (the only
                      end it has with --enforce-eager, which captures no graphs).
    ENGINE_STARTED    Initializing a V1 LLM engine (v0.9.1) with config: ...  / Initializing an
                      LLM engine (v0.4.2) with config: ... (V0; "a V0 LLM engine" in 0.8): the
                      engine's banner, before its workers start and NCCL comes up. It ends no
                      step: it says the log is read from the engine's start, so the stretch to
                      the first step line (NCCL init) can be judged while nothing else is logged.
    WEIGHTS_STARTED   Starting to load model meta-llama/Llama-3.1-8B...: the log is read and
                      the engine is loading its weights (it ends no step; NCCL init is over)
    COMPILE_STARTED   Dynamo bytecode transform time / Using cache directory ... torch.compile
    COMPILE_MISSED    Cache the graph for dynamic shape for later use / Compiling a graph for
                      general|dynamic shape takes 13.62 s: torch.compile missed its cache and
                      compiles (minutes, where a cache hit takes seconds)
    SERVER_STARTED    Starting vLLM API server [N] on URL / Starting vLLM server on URL

Ray prints a line that several workers logged once, then the others' copies later (minutes
later when the engine is quiet) as one `... [repeated 6x across cluster]` line: `is_reprint`
tells such a line and `vllm_clock` reads the time vLLM wrote in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

import msgspec

# In the order a V1 engine runs them; a V0 engine skips torch_compile.
STEPS = ("weights", "torch_compile", "memory_profiling", "kv_cache", "cuda_graphs", "api_server")
ENGINE_STARTED: Final = "engine_started"
WEIGHTS_STARTED: Final = "weights_started"
COMPILE_STARTED: Final = "torch_compile_started"
COMPILE_MISSED: Final = "torch_compile_missed"
GRAPH_MEMORY: Final = "graph_memory_profiling"
KV_CACHE_EXTENDED: Final = "kv_cache_extended"
KV_CACHE_STARTED: Final = "kv_cache_started"
GRAPHS_STARTED: Final = "cuda_graphs_started"
ENGINE_READY: Final = "engine_ready"
SERVER_STARTED: Final = "api_server_started"
# Not vLLM's: the follower read the log until it ended or hit its byte bound, and no further;
# what the engine does after its last line is then unknown (progress can no longer be judged).
LOG_ENDED: Final = "log_ended"
# The marks that say a step ended without being that step's own line: mark → the step it ends.
ENDS_BEFORE = {
    KV_CACHE_STARTED: "memory_profiling",
    GRAPHS_STARTED: "kv_cache",
    ENGINE_READY: "cuda_graphs",
}
MARKS = (
    *STEPS,
    ENGINE_STARTED,
    WEIGHTS_STARTED,
    COMPILE_STARTED,
    COMPILE_MISSED,
    GRAPH_MEMORY,
    KV_CACHE_STARTED,
    KV_CACHE_EXTENDED,
    GRAPHS_STARTED,
    ENGINE_READY,
    SERVER_STARTED,
)
# Lines are only matched when they hold one of these (a cheap test before any regex).
KEYWORDS = (
    "took",
    "takes",
    "KV cache",
    "for KV Cache",
    "blocks:",
    "finished in",
    "Capturing",
    "Dynamo bytecode",
    "torch.compile",
    "Starting vLLM",
    "Starting to load model",
    "Loading model from scratch",
    "LLM engine (v",
    "Cache the graph",
    "CUDA graph memory:",
    "Application startup complete",
)
_NUM = r"(-?[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?)"
_REPRINT = re.compile(r" \[repeated \d+x across cluster\]")
_VLLM_CLOCK = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")


class StepMark(msgspec.Struct, frozen=True):
    """What one log line says: a step ended (with the duration vLLM measured, when it says),
    or the engine reached a point (one of the marks above)."""

    step: str
    reported_s: float | None = None
    detail: str | None = None


def _weights(m: re.Match[str]) -> StepMark:
    secs = m.group("s")
    return StepMark("weights", _f(secs) if secs else None, f"{m.group('size')} {m.group('unit')}")


def _seconds(step: str) -> Callable[[re.Match[str]], StepMark]:
    return lambda m: StepMark(step, _f(m.group(1)))


def _kv_memory(m: re.Match[str]) -> StepMark:
    return StepMark("memory_profiling", None, f"{m.group(1)} GiB for KV cache")


def _blocks(m: re.Match[str]) -> StepMark:
    return StepMark(KV_CACHE_STARTED, None, f"{m.group(1)} GPU blocks")


def _tokens(m: re.Match[str]) -> StepMark:
    return StepMark(KV_CACHE_STARTED, None, f"{m.group(1)} tokens")


def _graphs(m: re.Match[str]) -> StepMark:
    took = m.group(2)
    return StepMark("cuda_graphs", _f(m.group(1)), f"{took} GiB" if took else None)


def _server(m: re.Match[str]) -> StepMark:
    return StepMark(SERVER_STARTED, None, m.group(1))


def _mark(step: str) -> Callable[[re.Match[str]], StepMark]:
    return lambda m: StepMark(step)


_FORMS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], StepMark]], ...] = (
    (
        re.compile(
            r"(?:Loading model weights|Model loading) took (?P<size>[0-9.]+) ?(?P<unit>GiB|GB)"
            r"(?: memory)?(?: and (?P<s>[0-9.]+) ?s(?:econds)?)?"
        ),
        _weights,
    ),
    (
        re.compile(
            r"(?:torch\.compile|graph compilation)"
            r"(?: and initial profiling/warmup run together)? (?:takes|took) "
            + _NUM
            + r" ?s in total"
        ),
        _seconds("torch_compile"),
    ),
    (
        re.compile(r"(?:Memory profiling|Initial profiling/warmup run) (?:takes|took) " + _NUM),
        _seconds("memory_profiling"),
    ),
    (re.compile(r"Available KV cache memory: " + _NUM + r" ?GiB"), _kv_memory),
    (re.compile(r"reserved " + _NUM + r" ?GiB memory for KV Cache as specified"), _kv_memory),
    (re.compile(r"# (?:GPU|cuda|CUDA) blocks: " + _NUM), _blocks),
    (re.compile(r"\b[A-Z]+(?: \+ host)? KV cache size: " + _NUM + r" tokens"), _tokens),
    (
        re.compile(r"Capturing (?:cudagraphs for decoding|the model for CUDA graphs)\."),
        _mark(GRAPHS_STARTED),
    ),
    (
        re.compile(r"Graph capturing finished in " + _NUM + r" ?secs?(?:, took " + _NUM + ")?"),
        _graphs,
    ),
    (
        re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUM),
        _mark(ENGINE_READY),
    ),
    (re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (\S+)"), _server),
    (re.compile(r"Application startup complete"), _mark("api_server")),
    (
        re.compile(
            r"Dynamo bytecode transform time|for vLLM's torch\.compile|Starting torch\.compile"
        ),
        _mark(COMPILE_STARTED),
    ),
    (re.compile(r"Starting to load model \S|Loading model from scratch"), _mark(WEIGHTS_STARTED)),
    (re.compile(r"Initializing an? (?:V\d )?LLM engine \(v"), _mark(ENGINE_STARTED)),
    (re.compile(r"(?:Profiling|Estimated) CUDA graph memory: "), _mark(GRAPH_MEMORY)),
    (
        re.compile(r"Extended KV cache to \d+ blocks|Remapping the KV cache from \d+"),
        _mark(KV_CACHE_EXTENDED),
    ),
    (
        re.compile(
            r"Cache the graph .*for later use"
            r"|Compiling a graph for (?:\w+ shape|compile range .*) takes"
        ),
        _mark(COMPILE_MISSED),
    ),
)


def parse_line(line: str) -> StepMark | None:
    """The step a vLLM log line marks, or None for every other line."""
    if not any(k in line for k in KEYWORDS):
        return None
    for pattern, build in _FORMS:
        m = pattern.search(line)
        if m is not None:
            return build(m)
    return None


def is_reprint(line: str) -> bool:
    """Ray's de-duplicated copy of lines other workers wrote earlier: it arrives late."""
    return _REPRINT.search(line) is not None


def vllm_clock(line: str, at: float) -> float | None:
    """The time vLLM's own prefix gives (`INFO 08-07 10:27:36`), read as UTC, in the year of
    `at` (the kubelet's time for the line; the year before for a 12-31 line read on 01-01).
    vLLM writes its container's local time, so this is off by the container's zone."""
    m = _VLLM_CLOCK.search(line)
    if m is None:
        return None
    mo, d, h, mi, s = (int(g) for g in m.groups())
    year = datetime.fromtimestamp(at, tz=UTC).year
    logged = _utc(year, mo, d, h, mi, s)
    if logged is not None and logged > at + 86400.0:  # a 12-31 line read on 01-01
        logged = _utc(year - 1, mo, d, h, mi, s)
    return logged


def _utc(year: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    try:
        return datetime(year, mo, d, h, mi, s, tzinfo=UTC).timestamp()
    except ValueError:  # 02-29 outside a leap year, or no such date: not vLLM's clock
        return None


def _f(text: str) -> float:
    return float(text.replace(",", ""))
