"""A model's first wave: no phase is judged stuck before a whole expected cold start while
the model's pods have not yet gone through it often enough to learn from
(`policy.history.budget`'s floor).

Found by sweeping the fleet simulator over fleets it was not tuned on: with a registry three
times slower, a 70B fleet's first pods reached engine init older than the expected cold
start (600 s), so `min_age` no longer held them, and the static engine-init budget (60 s,
the seed's) deleted them 80 s into a healthy ~240 s init: 18 healthy pods in a fleet with
no hangs at all. Default policy throughout, unless a test says otherwise.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.policy.builders import MODEL, T0, event, pod
from tests.policy.conftest import Run, make_run

SIBLING = dict(name="vllm-70b-7c9d5b6f4-sibli", uid="99999999-2222-3333-4444-555555555555")


def _slow_start(run: Run, pull: float, start: float) -> float:
    """The pod scheduled at 1 s, pulled for `pull` s, its engine container started `start`
    s later: when it started (seconds after T0)."""
    started = 1 + pull + start
    run.feed(
        pod(created=0, scheduled=1, waiting="ContainerCreating"),
        event("Pulling", 'Pulling image "vllm"', 1, name="pulling"),
        event(
            "Pulled", f'Successfully pulled image "vllm" in {pull:.0f}s', 1 + pull, name="pulled"
        ),  # fmt: skip
        pod(created=0, scheduled=1, started=started),
    )
    return started


def test_a_slow_pull_does_not_get_a_healthy_engine_init_deleted() -> None:
    run = make_run("")
    started = _slow_start(run, pull=546, start=94)  # the untuned fleet's pull, 3x slower
    run.at(T0 + started + 239)
    run.feed(pod(created=0, scheduled=1, started=started, ready=started + 240))
    run.at(T0 + started + 3600)
    assert run.decisions == [] and run.held == []


def test_a_hung_first_wave_pod_is_deleted_after_a_whole_cold_start() -> None:
    run = make_run("")
    started = _slow_start(run, pull=546, start=94)
    run.at(T0 + started + 619)
    assert run.decisions == []  # 600 s (the expected cold start) + 2 more checks
    run.at(T0 + started + 700)
    (d,) = run.decisions
    assert d.action == "delete-pod" and d.at == T0 + started + 620
    assert "over its 600s budget (no history of engine_init for " + MODEL in d.reason


def test_a_siblings_first_cold_start_brings_the_floor_down_at_the_next_check() -> None:
    """The pod's timer fires at its learned budget and finds the floor in the way; it looks
    again each check, so the sibling's cold start (50 s) lets the static budget judge it
    without waiting out the 600 s armed before."""
    run = make_run("")
    run.feed(pod(created=0, scheduled=1, started=10))
    run.at(T0 + 95)
    assert run.decisions == []  # due at 90 on its 60 s budget: no history, so 600 s
    run.feed(pod(**SIBLING, created=50, scheduled=51, started=60),
             pod(**SIBLING, created=50, scheduled=51, started=60, ready=100))  # fmt: skip
    run.at(T0 + 700)
    (d,) = run.decisions
    assert d.action == "delete-pod" and d.uid == "11111111-2222-3333-4444-555555555555"
    assert T0 + 100 <= d.at <= T0 + 110  # the next check after the sibling's Ready
    assert "over its 60s budget (static)" in d.reason


def test_a_budget_set_for_the_model_or_static_budgets_keep_no_floor() -> None:
    for text, due in ((f"stuck_pod: {{models: {{{MODEL}: {{engine_init: 120}}}}}}", 140),
                      ("stuck_pod: {adaptive: {enabled: false}}", 80)):  # fmt: skip
        run = make_run(text)
        started = _slow_start(run, pull=546, start=94)
        run.at(T0 + started + 700)
        assert [d.at - T0 - started for d in run.decisions] == [due], text


@settings(max_examples=60, deadline=None)
@given(
    pull=st.floats(0, 880),  # within image_pull's 900 s budget (and its checks)
    start=st.floats(1, 280),  # within container_start's 300 s
    engine=st.floats(1, 619),  # within a whole expected cold start (600 s) and its checks
)
def test_no_healthy_first_wave_pod_is_deleted_however_its_phases_add_up(
    pull: float, start: float, engine: float
) -> None:
    run = make_run("")
    started = _slow_start(run, pull=pull, start=start)
    run.at(T0 + started + engine - 0.5)
    run.feed(pod(created=0, scheduled=1, started=started, ready=started + engine))
    run.at(T0 + started + engine + 3600)
    assert [d.action for d in run.decisions if d.action == "delete-pod"] == []


def test_a_models_own_expected_cold_start_holds_its_first_wave_to_that() -> None:
    """`models.<model>.expected_cold_start_s`: a model known to start in two minutes has its
    first pods judged by that until one of its cold starts is learned, not by the fleet's
    600 s (random fleets 330 and 836: a single replica hung in its first wave waited ten
    minutes; 716 and 695 s against the seed rule's 181 and 260 s, 316 and 295 s so told)."""
    told = f"stuck_pod: {{models: {{{MODEL}: {{expected_cold_start_s: 120}}}}}}"
    for text, due in ((told, 140), ("", 620)):
        run = make_run(text)
        started = _slow_start(run, pull=20, start=4)
        run.at(T0 + started + 700)
        assert [d.at - T0 - started for d in run.decisions] == [due], text
    run = make_run(told)
    started = _slow_start(run, pull=20, start=4)
    run.at(T0 + started + 139)
    assert run.decisions == []  # its 120 s, and 2 more checks
    run.feed(pod(created=0, scheduled=1, started=started, ready=started + 130))
    run.at(T0 + started + 700)
    assert run.decisions == []  # Ready inside them: nothing deleted
