"""A simulated pod's vLLM start-up log: its engine init split into vLLM's steps, the line that
ends each, and where a hung engine stops logging.

Each cold start's engine init (its calibrated phase draw, unchanged) is split into the stretches a
V1 engine logs, by the shares the public logs give (`calibration.STEP_SHARES`), each share
varied per pod (log-normal, `STEP_SIGMA`) and the whole scaled back to the pod's engine init,
so a healthy pod is Ready exactly when it was before steps were modelled. As vLLM does, the
engine prints its banner (`Initializing a V1 LLM engine ...`) before its workers start and NCCL
comes up, and no step line until `Starting to load model`. A hung engine
(`calibration.HANG_STEPS`: NCCL init, torch.compile, CUDA graph capture) writes the lines of the
stretches before the one it hangs in, and nothing after: one hung in NCCL init, its banner.

The lines are the forms recent vLLM releases print (tests/data/vllm_logs): the fast path
builds the `EngineStep` the core's parser makes of each line, `--wire json` writes the line
itself as an `EngineLog` observation (tests check the two agree).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Final

import orjson

from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import COMPILE_STARTED, ENGINE_STARTED, WEIGHTS_STARTED
from remediator.sim.fleet.calibration import HANG_STEPS, STEP_SHARES, STEP_SIGMA
from remediator.sim.fleet.draws import PodDraws

# The line that ends each stretch but the last (to Ready, which ends with no line).
_ENDED_BY = {"engine_start": ENGINE_STARTED, "nccl_init": WEIGHTS_STARTED}
_ENDS = tuple(_ENDED_BY.get(step, step) for step, _ in STEP_SHARES[:-1])
# The lines, in order: the mark each makes, and where torch.compile begins (its cache
# directory, printed as the weights are in).
_COMPILE_AT = _ENDS.index("weights") + 1
LOGGED = (*_ENDS[:_COMPILE_AT], COMPILE_STARTED, *_ENDS[_COMPILE_AT:])
_WEIGHTS = tuple(w for _, w in STEP_SHARES)
_DRAW: Final = 200  # the pods' draws for their steps: 200 + i and 300 + i (Box-Muller)
_WEIGHTS_GIB = "65.7"  # a 70B model's half (TP=2), per worker
_KV_GIB = "52.12"
_GRAPHS_GIB = "0.45"
_MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def line_offsets(draws: PodDraws, init: float) -> tuple[float, ...]:
    """Seconds from the container's start to each `LOGGED` step's line, for a pod whose engine
    init takes `init` seconds (the last line comes before Ready: the readiness probe)."""
    weights = [w * math.exp(STEP_SIGMA * draws.normal(_DRAW + i)) for i, w in enumerate(_WEIGHTS)]
    scale = init / sum(weights)
    out, at = [], 0.0
    for w in weights[:-1]:
        at += w * scale
        out.append(at)
    out.insert(_COMPILE_AT, out[_COMPILE_AT - 1])  # the compile begins as the weights are in
    return tuple(out)


def hang_lines(u: float) -> int:
    """How many lines a hung engine writes before it hangs (`u` uniform in (0, 1)): the
    stretch it hangs in is one of HANG_STEPS, equally likely; it never writes the line that
    would end it."""
    step = HANG_STEPS[min(len(HANG_STEPS) - 1, int(u * len(HANG_STEPS)))]
    return LOGGED.index(_ENDED_BY.get(step, step))


def hung_in(logged: int) -> str | None:
    """The stretch a hung engine that wrote `logged` lines hangs in (`hang_lines`' inverse):
    one of HANG_STEPS."""
    return next((s for s in HANG_STEPS if LOGGED.index(_ENDED_BY.get(s, s)) == logged), None)


def record(
    i: int, offsets: tuple[float, ...], namespace: str, pod: str, uid: str, at: float
) -> EngineStep:
    """Line `i` as the core's parser reads it, stamped `at` (whole epoch seconds)."""
    step = LOGGED[i]
    seconds = offsets[i] - (offsets[i - 1] if i else 0.0)
    if step in (ENGINE_STARTED, WEIGHTS_STARTED, COMPILE_STARTED):
        return EngineStep(namespace, pod, uid, step, None, None, at, at)
    if step == "weights":
        return EngineStep(namespace, pod, uid, step, float(f"{seconds:.6f}"),
                          f"{_WEIGHTS_GIB} GiB", at, at)  # fmt: skip
    if step == "torch_compile":
        return EngineStep(namespace, pod, uid, step, float(f"{seconds:.2f}"), None, at, at)
    if step == "memory_profiling":
        return EngineStep(namespace, pod, uid, step, None, f"{_KV_GIB} GiB for KV cache", at, at)
    if step == "cuda_graphs":
        return EngineStep(namespace, pod, uid, step, float(f"{seconds:.0f}"),
                          f"{_GRAPHS_GIB} GiB", at, at)  # fmt: skip
    return EngineStep(namespace, pod, uid, step, None, None, at, None)  # uvicorn's, no clock


def text(i: int, offsets: tuple[float, ...], at: float) -> str:
    """Line `i` as vLLM writes it (its clock: the container's, UTC here)."""
    step = LOGGED[i]
    seconds = offsets[i] - (offsets[i - 1] if i else 0.0)
    clock = datetime.fromtimestamp(at, tz=UTC).strftime("%m-%d %H:%M:%S")
    prefix = f"(EngineCore_DP0 pid=312) INFO {clock}"
    if step == ENGINE_STARTED:
        return (f"{prefix} [core.py:93] Initializing a V1 LLM engine (v0.11.2) with config: "
                f"model='{_MODEL}', tensor_parallel_size=2")  # fmt: skip
    if step == WEIGHTS_STARTED:
        return f"{prefix} [gpu_model_runner.py:2602] Starting to load model {_MODEL}..."
    if step == "weights":
        return (f"{prefix} [gpu_model_runner.py:1770] Model loading took {_WEIGHTS_GIB} GiB "
                f"memory and {seconds:.6f} seconds")  # fmt: skip
    if step == "torch_compile":
        return f"{prefix} [monitor.py:34] torch.compile took {seconds:.2f} s in total"
    if step == COMPILE_STARTED:
        cache = "/root/.cache/vllm/torch_compile_cache/5e7c1a9b3f/rank_0_0/backbone"
        return f"{prefix} [backends.py:548] Using cache directory: {cache} for vLLM's torch.compile"
    if step == "memory_profiling":
        return f"{prefix} [gpu_worker.py:298] Available KV cache memory: {_KV_GIB} GiB"
    if step == "cuda_graphs":
        return (f"{prefix} [gpu_model_runner.py:2567] Graph capturing finished in "
                f"{seconds:.0f} secs, took {_GRAPHS_GIB} GiB")  # fmt: skip
    return "(APIServer pid=1) INFO:     Application startup complete."


def log_json(item: EngineStep, line: str) -> bytes:
    """The `EngineLog` observation (decode.py) of one line."""
    stamp = datetime.fromtimestamp(item.at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return orjson.dumps({"kind": "EngineLog", "namespace": item.namespace, "pod": item.pod,
                         "uid": item.uid, "time": stamp, "line": line})  # fmt: skip
