"""Engine init split into vLLM's steps: real log lines on the realistic 70B cold start."""

from __future__ import annotations

import io
import random
from typing import Any

import orjson
from prometheus_client import generate_latest

from remediator.inputs.records import EngineStep
from remediator.output import JsonOutput, TextOutput
from remediator.policy_file import load_policy
from remediator.session import Session
from remediator.timeline import timelines_from
from tests.data import vllm_logs
from tests.timeline.streams import NS, POD, T0, UID, cold_start, first_token, pod, watch

STARTED = 289.0  # the container's start in cold_start(); Ready at 525


def _line(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


# Real lines (vLLM 0.11.2, 0.9, uvicorn) at the times this pod logged them.
STEP_LINES = [
    (330.0, _line("2025-11-v1-engine.log", "Model loading took")),
    (337.0, _line("2025-11-v1-engine.log", "Dynamo bytecode")),
    (352.0, _line("2025-11-v1-engine.log", "torch.compile takes")),
    (353.0, _line("2025-11-v1-engine.log", "Available KV cache memory")),
    (354.0, _line("2025-11-v1-engine.log", "GPU KV cache size")),
    (391.0, _line("2025-06-v1-api-server.log", "Graph capturing finished")),
    (392.0, _line("2025-06-v1-api-server.log", "Starting vLLM API server")),
    (393.0, "INFO:     Application startup complete."),
]
NOISE = [(340.0 + i, ln) for i, ln in enumerate(vllm_logs.lines("2025-04-uvicorn.log"))]
# V1 says nothing between sizing its KV cache (354) and the end of graph capture: the cache's
# allocation is counted in cuda_graphs, and kv_cache has no end of its own.
EXPECTED = {
    "weights": 41.0,
    "torch_compile": 22.0,
    "memory_profiling": 2.0,
    "cuda_graphs": 37.0,
    "api_server": 2.0,
    "until_ready": 132.0,
}


def _logs(pairs: list[tuple[float, str]], uid: str | None = None) -> list[dict[str, Any]]:
    base = T0.timestamp()
    return [vllm_logs.engine_log(NS, POD, line, base + at, uid) for at, line in pairs]


def _stream(pairs: list[tuple[float, str]]) -> list[bytes]:
    objs = cold_start()
    objs[-3:-3] = _logs(pairs)  # between the container's start and Ready, as followed live
    return [orjson.dumps(o) for o in objs]


def test_steps_split_engine_init_and_add_up_to_it() -> None:
    t = timelines_from(_stream(STEP_LINES + NOISE)).get(UID)
    assert t is not None
    assert t.engine_steps() == EXPECTED
    assert sum(EXPECTED.values()) == t.phases()["engine_init"] == 236.0
    doc = t.to_json()
    assert doc["engine_init_steps"] == EXPECTED and doc["engine_init_step"] is None
    assert doc["engine_init_detail"]["kv_cache"] == "1,587,648 tokens"
    assert t.engine is not None and t.engine.reported["weights"] == 27.200487


def test_steps_do_not_depend_on_input_order() -> None:
    lines = _stream(STEP_LINES + NOISE)
    for seed in range(20):
        shuffled = lines[:]
        random.Random(seed).shuffle(shuffled)
        t = timelines_from(shuffled).get(UID)
        assert t is not None and t.engine_steps() == EXPECTED, seed


def test_the_slowest_tensor_parallel_worker_ends_a_step() -> None:
    workers = [(325.0, STEP_LINES[0][1]), (330.0, STEP_LINES[0][1]), (328.0, STEP_LINES[0][1])]
    t = timelines_from(_stream(workers + STEP_LINES[1:])).get(UID)
    assert t is not None and t.engine_steps()["weights"] == 41.0


def test_a_previous_runs_lines_are_left_out() -> None:
    earlier_run = [(200.0, STEP_LINES[0][1]), (250.0, STEP_LINES[5][1])]
    t = timelines_from(_stream(earlier_run + STEP_LINES)).get(UID)
    assert t is not None and t.engine_steps() == EXPECTED


def test_a_stall_is_named_by_its_step() -> None:
    """Stuck after the KV cache was sized: the engine is allocating it (V1 prints nothing more
    until graph capture ends, so an out-of-memory death here is the cache's)."""
    objs = [watch(pod(created=0, scheduled=12, started=STARTED), "ADDED"), *_logs(STEP_LINES[:5])]
    t = timelines_from([orjson.dumps(o) for o in objs]).get(UID)
    assert t is not None and t.state() == "engine_init"
    assert t.engine_step() == "kv_cache"
    assert t.to_json()["engine_init_step"] == "kv_cache"
    assert t.engine_steps() == {k: EXPECTED[k] for k in list(EXPECTED)[:3]}


def test_where_the_engine_is_before_any_step_ended() -> None:
    base = [watch(pod(created=0, scheduled=12, started=STARTED), "ADDED")]
    cases = [
        ([], None),  # no line read: nothing known (no engine record at all)
        (_logs([(300.0, "INFO:     Started server process [1]")]), None),
        (_logs(STEP_LINES[:1]), "memory_profiling"),  # V0: no torch.compile
        (_logs(STEP_LINES[:2]), "torch_compile"),
        (_logs(STEP_LINES[:7]), "api_server"),
    ]
    for logs, step in cases:
        t = timelines_from([orjson.dumps(o) for o in base + logs]).get(UID)
        assert t is not None and t.engine_step() == step, logs


def test_the_stuck_decision_names_the_step() -> None:
    policy = "stuck_pod: {selector: app=vllm, budgets: {engine_init: 90}, checks: 1,\n"
    policy += "  adaptive: {enabled: false},\n"  # the static budget, as the reason says
    policy += "  progress: {factor: 2}}\n"  # (pinned: the figures below are the factor's)
    policy += "guardrails: {min_age: {factor: 0}}\n"
    session = Session(load_policy(policy))
    out = JsonOutput(io.StringIO())
    items = [watch(pod(created=0, scheduled=12, started=STARTED), "ADDED"), *_logs(STEP_LINES[:5])]
    from remediator.inputs.decode import decode

    for o in items:
        for item in decode(orjson.dumps(o)):
            session.feed(item, out)
    session.advance(T0.timestamp() + STARTED + 400, out)
    stream = out._stream
    assert isinstance(stream, io.StringIO)
    lines = [orjson.loads(x) for x in stream.getvalue().splitlines()]
    decisions = [d for d in lines if d["kind"] == "decision"]
    assert len(decisions) == 1 and decisions[0]["action"] == "delete-pod"
    # Its last step line 65 s into engine init, its longest step 41 s: past the 90 s budget,
    # its own pace holds it (twice that, 82 s of silence: tests/policy/test_own_pace.py).
    assert (
        "engine_init for 147s, over its 90s budget (static) for 1 checks in a row; "
        "stalled in vLLM step kv_cache for 82s; 82s since its last step line, over its own "
        "pace (82s: 2× its longest step, 41s, at least 30s" in decisions[0]["reason"]
    )


def test_steps_reach_the_metrics_and_the_text_output() -> None:
    from remediator.inputs.decode import decode

    session = Session()
    text = io.StringIO()
    out = TextOutput(text)
    objs = cold_start()
    objs[-3:-3] = _logs(STEP_LINES)
    objs.append(first_token(531))
    for o in objs:
        for item in decode(orjson.dumps(o)):
            session.feed(item, out)
    out.finish(session, len(objs), len(objs), 0)
    exposition = generate_latest(session.registry).decode()
    model = "meta-llama/Llama-3.1-70B-Instruct"
    for step, seconds in EXPECTED.items():
        assert (
            f'remediator_engine_init_step_seconds_sum{{model="{model}",step="{step}"}} {seconds}'
            in exposition
        )
    shown = text.getvalue()
    assert " · cuda_graphs        37.0s" in shown and "0.45 GiB" in shown
    assert " · until_ready       132.0s" in shown


def test_a_line_read_after_ready_still_counts_once() -> None:
    from remediator.inputs.decode import decode

    session = Session()
    out = JsonOutput(io.StringIO())
    objs = cold_start() + _logs(STEP_LINES) + _logs(STEP_LINES)
    for o in objs:
        for item in decode(orjson.dumps(o)):
            session.feed(item, out)
    exposition = generate_latest(session.registry).decode()
    assert (
        'remediator_engine_init_step_seconds_count{model="meta-llama/Llama-3.1-70B-Instruct",'
        'step="weights"} 1.0' in exposition
    )


def test_a_line_for_an_unknown_pod_changes_nothing() -> None:
    tracker = timelines_from([orjson.dumps(o) for o in _logs(STEP_LINES)])
    assert len(tracker) == 0
    assert isinstance(EngineStep("a", "b", None, "weights", None, None, 1.0), EngineStep)
