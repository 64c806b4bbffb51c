"""vLLM's start-up log lines → the engine-init step each one ends. Pure; unknown lines → None.

The forms are vLLM's own `logger.info` calls, across releases (see tests/data/vllm_logs):

    weights           Loading model weights took 1.5874 GB                      (≤0.6, V0)
                      Model loading took 7.6785 GiB and 2.195456 seconds         (V1)
                      Model loading took 2.0513 GiB memory and 27.200487 seconds (≥0.11.1)
    torch_compile     torch.compile takes 19.69 s in total
    memory_profiling  Memory profiling takes 34.26 seconds                       (V0)
                      Available KV cache memory: 33.31 GiB                       (V1)
    kv_cache          # GPU blocks: 7191, # CPU blocks: 512  (# cuda blocks: in 0.8 V0)
                      GPU KV cache size: 1,587,648 tokens                        (V1)
    cuda_graphs       Graph capturing finished in 37 secs, took 0.45 GiB
    api_server        Application startup complete.  (uvicorn, after "Starting vLLM API server")

A step is the time from the previous step's line (or the container's start) to its own line.
Two lines only say where the engine is, not that a step ended: torch.compile starting
("Dynamo bytecode transform time", "Using cache directory ... torch.compile") and the API
server starting ("Starting vLLM API server [N] on URL", "Starting vLLM server on URL").
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

# In the order a V1 engine runs them; a V0 engine skips torch_compile.
STEPS = ("weights", "torch_compile", "memory_profiling", "kv_cache", "cuda_graphs", "api_server")
COMPILE_STARTED = "torch_compile_started"
SERVER_STARTED = "api_server_started"
# Lines are only matched when they hold one of these (a cheap test before any regex).
KEYWORDS = (
    "took",
    "takes",
    "KV cache",
    "blocks:",
    "finished in",
    "Dynamo bytecode",
    "torch.compile",
    "Starting vLLM",
    "Application startup complete",
)
_NUM = r"([0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?)"


class StepMark(msgspec.Struct, frozen=True):
    """What one log line says: a step ended (with the duration vLLM measured, when it says),
    or the engine reached a point inside a step (COMPILE_STARTED, SERVER_STARTED)."""

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
    return StepMark("kv_cache", None, f"{m.group(1)} GPU blocks")


def _tokens(m: re.Match[str]) -> StepMark:
    return StepMark("kv_cache", None, f"{m.group(1)} tokens")


def _graphs(m: re.Match[str]) -> StepMark:
    took = m.group(2)
    return StepMark("cuda_graphs", _f(m.group(1)), f"{took} GiB" if took else None)


def _server(m: re.Match[str]) -> StepMark:
    return StepMark(SERVER_STARTED, None, m.group(1))


def _ready(m: re.Match[str]) -> StepMark:
    return StepMark("api_server")


def _compiling(m: re.Match[str]) -> StepMark:
    return StepMark(COMPILE_STARTED)


_FORMS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], StepMark]], ...] = (
    (
        re.compile(
            r"(?:Loading model weights|Model loading) took (?P<size>[0-9.]+) ?(?P<unit>GiB|GB)"
            r"(?: memory)?(?: and (?P<s>[0-9.]+) ?s(?:econds)?)?"
        ),
        _weights,
    ),
    (re.compile(r"torch\.compile takes " + _NUM + r" ?s in total"), _seconds("torch_compile")),
    (re.compile(r"Memory profiling takes " + _NUM + r" ?s"), _seconds("memory_profiling")),
    (re.compile(r"Available KV cache memory: " + _NUM + r" ?GiB"), _kv_memory),
    (re.compile(r"# (?:GPU|cuda|CUDA) blocks: " + _NUM), _blocks),
    (re.compile(r"GPU KV cache size: " + _NUM + r" tokens"), _tokens),
    (
        re.compile(r"Graph capturing finished in " + _NUM + r" ?secs?(?:, took " + _NUM + ")?"),
        _graphs,
    ),
    (re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (\S+)"), _server),
    (re.compile(r"Application startup complete"), _ready),
    (re.compile(r"Dynamo bytecode transform time|for vLLM's torch\.compile"), _compiling),
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


def _f(text: str) -> float:
    return float(text.replace(",", ""))
