"""The kill-loop guard holds a replacement as slow as the pod deleted before it (the budget,
not the pod, may be wrong); one whose log shows it stopped where that pod went on is stuck,
not slow, and is deleted (`stall.stopped_behind`).

Random fleet 1800 (tuned, 20% hangs): a Mixtral pod hung in CUDA graph capture was deleted
over its first-wave budget; its replacement hung in NCCL init, which the first had ended in
seconds, and was held, and with it every later pod of the workload, for the rest of the run.
Real vLLM lines at made-up times, as in test_progress.py."""

from __future__ import annotations

from tests.data import vllm_logs
from tests.policy.builders import T0, pod
from tests.policy.conftest import RELAXED, Run, make_run
from tests.policy.test_progress import STEPS
from tests.policy.test_progress_first_step import BANNER

UID_B = "99999999-2222-3333-4444-555555555555"
B = "vllm-70b-7c9d5b6f4-fghij"
POLICY = RELAXED + "  blast_radius: {window_s: 1}\n"
# The first pod's log: its banner, its weights in at 40 s, its compile and profiling, its KV
# cache sized at 62 s, then nothing (hung in graph capture).
HUNG_IN_GRAPHS = [BANNER, *STEPS[:6]]


def _lines(run: Run, name: str, started: float, lines: list[tuple[float, str]]) -> None:
    for at, line in lines:
        run.feed(vllm_logs.engine_log("llm", name, line, T0 + started + at))


def _replaced(replacement: list[tuple[float, str]]) -> tuple[Run, float]:
    """The first pod hangs in graph capture and is deleted; its replacement, created after,
    logs `replacement`. When the replacement's container started."""
    run = make_run(POLICY)
    run.feed(pod(created=0, scheduled=1, started=10))
    _lines(run, "vllm-70b-7c9d5b6f4-abcde", 10.0, HUNG_IN_GRAPHS)
    run.at(T0 + 600)
    (first,) = run.decisions
    assert first.action == "delete-pod"
    deleted = first.at - T0
    run.feed(pod(created=0, scheduled=1, started=10, watch="DELETED"))
    started = deleted + 5
    run.feed(pod(B, UID_B, watch="ADDED", created=deleted + 1, scheduled=deleted + 2,
                 started=started))  # fmt: skip
    _lines(run, B, started, replacement)
    run.at(T0 + started + 1000)
    return run, started


def test_a_replacement_stuck_where_the_deleted_pod_went_on_is_deleted() -> None:
    """Its banner, then nothing: in NCCL init for 80 s at its budget (60 s and two checks),
    which the first pod ended in 5 s (limit: the floor, 30 s)."""
    run, started = _replaced([BANNER])
    assert [(d.action, d.target) for d in run.decisions][1:] == [("delete-pod", B)]
    assert run.decisions[1].at == T0 + started + 80
    assert "too tight" not in run.decisions[1].reason


def test_a_replacement_stuck_where_the_deleted_pod_was_is_held_and_told() -> None:
    """It got as far as the first pod and stopped there too: as slow, so the budget may be
    what is wrong; held, and on-call told once."""
    run, _ = _replaced(HUNG_IN_GRAPHS)
    assert [(d.action, d.target) for d in run.decisions][1:] == [("notify", B)]
    assert "too tight" in run.decisions[1].reason


def test_a_replacement_whose_log_is_not_read_is_held_as_before() -> None:
    run, _ = _replaced([])
    assert [(d.action, d.target) for d in run.decisions][1:] == [("notify", B)]


def test_a_replacement_in_a_compile_beside_a_compile_that_hit_its_cache_is_held() -> None:
    """The first pod's compile took 20 s, a cache hit (no "Cache the graph" line); its
    replacement has compiled for 60 s: a miss, perhaps, not yet logged. A hit's time bounds
    no miss: held and told, as before."""
    compiling = [BANNER, STEPS[0], (20.0, STEPS[1][1]), (28.0, STEPS[2][1])]
    run, _ = _replaced(compiling)
    assert [(d.action, d.target) for d in run.decisions][1:] == [("notify", B)]
