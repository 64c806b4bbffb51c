"""EngineSteps remembers each step's end between lines (the policy asks for the same ends many
times per line): what it answers is what a record built afresh from the same lines answers,
whatever lines come, in whatever order, reprints and clocks included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import COMPILE_MISSED, ENGINE_STARTED, LOG_ENDED, MARKS, STEPS
from remediator.policy.stall import stretches_ended
from remediator.timeline.engine_steps import BEFORE_FIRST_STEP, EngineSteps
from remediator.timeline.model import PodTimeline

LINE = st.builds(
    EngineStep,
    namespace=st.just("inference"),
    pod=st.just("p"),
    uid=st.just("u"),
    step=st.sampled_from([*MARKS, LOG_ENDED]),
    reported_s=st.none(),
    detail=st.none(),
    at=st.integers(0, 400).map(float),
    logged=st.one_of(st.none(), st.integers(-30000, 400).map(float)),
    reprint=st.booleans(),
)
BOUND = st.one_of(st.none(), st.integers(0, 400).map(float))


@settings(max_examples=300)
@given(st.lists(LINE, max_size=25), BOUND, BOUND)
def test_remembered_ends_are_the_ends_worked_out_afresh(
    lines: list[EngineStep], started: float | None, until: float | None
) -> None:
    kept = EngineSteps()
    for i, line in enumerate(lines):
        kept.see(line)
        fresh = EngineSteps()
        for earlier in lines[: i + 1]:
            fresh.see(earlier)
        for step in (*STEPS, *MARKS, LOG_ENDED):
            assert kept.end(step, started, until) == fresh.end(step, started, until), step
        assert kept.last_end(started) == fresh.last_end(started)
        assert kept.current(started) == fresh.current(started)


def _line(step: str, at: float) -> EngineStep:
    return EngineStep("inference", "p", "u", step, None, None, at)


def test_a_compile_that_missed_its_cache_is_judged_as_one() -> None:
    """The policy sets a compile beside siblings' compiles that also missed (minutes), not
    beside cache hits (seconds); the other steps keep their names and order."""
    steps = EngineSteps()
    for step, at in (("weights", 40.0), (COMPILE_MISSED, 45.0), ("torch_compile", 160.0)):
        steps.see(_line(step, at))
    steps.see(_line("memory_profiling", 165.0))
    assert list(steps.judged(0.0).items()) == [
        ("weights", 40.0),
        (COMPILE_MISSED, 120.0),
        ("memory_profiling", 5.0),
    ]
    hit = EngineSteps()
    for step, at in (("weights", 40.0), ("torch_compile", 48.0)):
        hit.see(_line(step, at))
    assert hit.judged(0.0) == {"weights": 40.0, "torch_compile": 8.0}
    assert steps.judged(200.0) == {}  # (a later run's: nothing of this one counts)


def test_the_stretches_a_deleted_pod_ended_leave_its_judged_steps_as_they_were() -> None:
    """`stretches_ended` adds the stretch before the first step line to what `judged` answers;
    `judged` shares its answer until the next line, so the pod's pace (which reads it) must not
    see that stretch counted twice."""
    t = PodTimeline("u", "inference", "p")
    t.started, t.engine = 0.0, EngineSteps()
    assert t.engine is not None
    for step, at in ((ENGINE_STARTED, 5.0), ("weights", 40.0), ("torch_compile", 48.0)):
        t.engine.see(_line(step, at))
    assert stretches_ended(t) == {BEFORE_FIRST_STEP: 40.0, "weights": 40.0, "torch_compile": 8.0}
    assert t.engine.judged(0.0) == {"weights": 40.0, "torch_compile": 8.0}
