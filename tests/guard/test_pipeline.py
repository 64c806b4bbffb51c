from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.contract.decision import Decision, Suppressed
from remediator.guard import ORDER, GuardState, StateError, build_pipeline, engage
from remediator.guard.blast_radius import BlastRadiusConfig, BlastRadiusState
from remediator.guard.config import GuardConfig
from remediator.guard.cooldown import CooldownConfig, CooldownState
from remediator.guard.dedup import DedupState
from remediator.guard.dry_run import DryRunConfig
from remediator.guard.idempotency import IdempotencyState
from remediator.guard.kill_switch import KillSwitchState
from remediator.guard.pipeline import Pipeline
from remediator.guard.stage import PASS, Verdict, suppress

from .factory import T0, make, notify


def test_order_is_fixed_and_documented() -> None:
    assert (
        build_pipeline().names
        == ORDER
        == (
            "kill_switch",
            "idempotency",
            "dedup",
            "watch_current",
            "cooldown",
            "min_age",
            "blast_radius",
            "cordon_cap",
            "hedge_budget",
            "rate_limit",
            "dry_run",
        )
    )


@dataclass(frozen=True)
class Probe:
    """A stage that says what it was told to and logs what it saw."""

    name: str
    answer: str | None
    seen: list[str]
    simulates: bool = False

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        self.seen.append(f"check {self.name}")
        return PASS if self.answer is None else suppress(self.answer)

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        self.seen.append(f"record {self.name}")
        return engage(
            state,
            state.of("kill_switch", KillSwitchState).engaged,
            state.of("kill_switch", KillSwitchState).note + self.name,
        )


@pytest.mark.parametrize(
    ("answers", "guardrail", "seen"),
    [
        (
            (None, None, None),
            None,
            ["check a", "check b", "check c", "record a", "record b", "record c"],
        ),
        (("no a", "no b", None), "a", ["check a"]),
        ((None, "no b", "no c"), "b", ["check a", "check b"]),
        ((None, None, "no c"), "c", ["check a", "check b", "check c"]),
    ],
)
def test_first_no_wins_and_only_a_passed_decision_is_recorded(
    answers: tuple[str | None, ...], guardrail: str | None, seen: list[str]
) -> None:
    log: list[str] = []
    pipeline = Pipeline(tuple(Probe(n, a, log) for n, a in zip("abc", answers, strict=True)))
    state = GuardState()
    result, after = pipeline.run(make(), T0, state)
    assert log == seen
    if guardrail is None:
        assert result == make()
        assert after.of("kill_switch", KillSwitchState).note == "abc"
    else:
        assert result == Suppressed(make(), guardrail=guardrail, reason=f"no {guardrail}")
        assert after is state


def test_kill_switch_wins_over_dry_run() -> None:
    pipeline = build_pipeline(GuardConfig({"dry_run": DryRunConfig(enabled=True)}))
    result, _ = pipeline.run(make(), T0, engage(GuardState(), True))
    assert isinstance(result, Suppressed) and result.guardrail == "kill_switch"


def test_dry_run_says_would_only_for_what_a_live_run_would_do() -> None:
    pipeline = build_pipeline(GuardConfig({"dry_run": DryRunConfig(enabled=True)}))
    young = make(pod_created_at=T0 - 1)  # min_age says no first: not a "would delete"
    result, state = pipeline.run(young, T0, GuardState())
    assert isinstance(result, Suppressed) and result.guardrail == "min_age"
    result, state = pipeline.run(make(), T0, state)
    assert result == Suppressed(
        make(), "dry_run", "dry-run: would delete-pod ml/vllm-0", simulated=True
    )
    # remembered as if it had run: the repeat is a repeat, not a second "would"
    again, _ = pipeline.run(make(), T0 + 60, state)
    assert isinstance(again, Suppressed) and again.guardrail == "idempotency"


def test_a_suppressed_decision_leaves_no_trace() -> None:
    pipeline, state = build_pipeline(), GuardState()
    young = make(pod_created_at=T0 - 1)
    result, after = pipeline.run(young, T0, state)
    assert isinstance(result, Suppressed) and result.guardrail == "min_age"
    assert after == state
    # the same incident, once old enough, is not held up by idempotency, dedup or cooldown
    result, _ = pipeline.run(young, T0 + 300, after)
    assert result == young


def test_repeated_alert_is_deduplicated_and_the_incident_is_acted_on_once() -> None:
    pipeline, state = build_pipeline(), GuardState()
    first, state = pipeline.run(make(), T0, state)
    assert first == make()
    again, _ = pipeline.run(make(), T0 + 60, state)
    assert isinstance(again, Suppressed) and again.guardrail == "idempotency"
    watch, _ = pipeline.run(make(incident="watch-1"), T0 + 60, state)
    assert isinstance(watch, Suppressed) and watch.guardrail == "dedup"


@pytest.mark.parametrize("on", [True, False])
def test_notify_bypasses_kill_switch_and_dry_run_but_not_dedup(on: bool) -> None:
    pipeline = build_pipeline(GuardConfig({"dry_run": DryRunConfig(enabled=on)}))
    state = engage(GuardState(), on)
    note = notify(pod_created_at=None, replicas=None)
    first, state = pipeline.run(note, T0, state)
    assert first == note
    second, _ = pipeline.run(notify(incident="inc-2"), T0 + 1, state)
    assert isinstance(second, Suppressed) and second.guardrail == "dedup"


def _sequence() -> list[tuple[Decision, float]]:
    out = []
    for i in range(40):
        out.append(
            (
                make(
                    incident=f"i{i % 13}",
                    target=f"vllm-{i % 11}",
                    workload=f"ml/Deployment/w{i % 7}",
                ),
                T0 + 37 * i,
            )
        )
        out.append((notify(incident=f"n{i}", target=f"vllm-{i % 2}"), T0 + 37 * i + 1))
        out.append(
            (
                make(action="restart-warmup", target="gpu-warmup", incident=f"r{i // 9}"),
                T0 + 37 * i + 2,
            )
        )
    return out


def test_state_round_trips_through_json_without_changing_any_outcome() -> None:
    # Tight caps, so that the sequence meets every stage (the defaults are looser).
    caps = BlastRadiusConfig(max_pods=2, max_pods_cluster=5)
    config = GuardConfig().with_stage("cooldown", CooldownConfig(600.0))
    pipeline = build_pipeline(config.with_stage("blast_radius", caps))
    straight, through_json = GuardState(), GuardState()
    outcomes = []
    for decision, now in _sequence():
        a, straight = pipeline.run(decision, now, straight)
        b, through_json = pipeline.run(
            decision, now, build_pipeline().load_state(through_json.to_json())
        )
        assert a == b
        assert build_pipeline().load_state(straight.to_json()) == straight
        outcomes.append(a)
    kinds = {o.guardrail if isinstance(o, Suppressed) else "passed" for o in outcomes}
    assert {"passed", "idempotency", "dedup", "cooldown", "blast_radius"} <= kinds


def test_state_stays_bounded() -> None:
    pipeline, state = build_pipeline(), GuardState()
    for i in range(2000):  # a new pod every 10 minutes for ~2 weeks
        decision = make(incident=f"i{i}", target=f"p{i}", workload=f"ml/Deployment/w{i}")
        result, state = pipeline.run(decision, T0 + 600 * i, state)
        assert result == decision
    assert (
        len(state.of("dedup", DedupState).seen) == 1
        and len(state.of("cooldown", CooldownState).last) == 2
    )
    assert len(state.of("blast_radius", BlastRadiusState).deletions) == 1
    assert len(state.of("idempotency", IdempotencyState).acted) == 86400 // 600


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("{", "$"),
        ("[]", "$"),
        ('{"version": 2}', "version"),
        ('{"version": 1, "newer": {"n": NaN}}', "newer"),
        ('{"version": 1, "dedup": {"seen": {"k": "x"}}}', "dedup.seen.k"),
        ('{"version": 1, "dedup": {"seen": []}}', "dedup.seen"),
        ('{"version": 1, "cooldown": {"last": {"k": NaN}}}', "cooldown.last.k"),
        ('{"version": 1, "kill_switch": {"engaged": "yes"}}', "kill_switch.engaged"),
        ('{"version": 1, "blast_radius": {"deletions": [["w"]]}}', "blast_radius.deletions[0]"),
        ('{"version": 1, "rate_limit": {"tokens": true}}', "rate_limit.tokens"),
    ],
)
def test_bad_stored_state_is_refused_with_its_path(text: str, path: str) -> None:
    with pytest.raises(StateError) as caught:
        build_pipeline().load_state(text)
    assert caught.value.path == path


def test_a_newer_releases_records_are_kept_as_they_are_and_unused() -> None:
    """After a rollback, the state holds a record of a guardrail this release does not have:
    it is read (no refusal, no crash loop), not used, and written back unchanged beside what
    this release records, so rolling forward again finds it."""
    newer = {"n": [["node-a", 1.5]], "hours": {"7": 2}}
    text = json.dumps({"version": 1, "node_quiet": newer, "kill_switch": {"engaged": True}})
    state = build_pipeline().load_state(text)
    assert state.foreign == ("node_quiet",)
    held, _ = build_pipeline().run(make(), T0, state)  # its own records are read and used
    assert isinstance(held, Suppressed) and held.guardrail == "kill_switch"
    _, after = build_pipeline().run(make(), T0, engage(state, False))
    assert after.foreign == ("node_quiet",)
    doc = json.loads(after.to_json())
    assert doc["node_quiet"] == newer and "idempotency" in doc
    assert build_pipeline().load_state(after.to_json()) == after


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@given(st.dictionaries(st.text(min_size=1, max_size=8), _json, max_size=3))
def test_whatever_a_newer_release_kept_is_written_back_or_refused_by_name(
    records: dict[str, object],
) -> None:
    """Any records under names no guardrail here has: read back and written again as they
    came, or, where one is not JSON to_json could write (NaN, Infinity), refused naming it."""
    pipeline = build_pipeline()
    newer = {k: v for k, v in records.items() if k not in pipeline.state_kinds and k != "version"}
    text = json.dumps({"version": 1, **newer})
    try:
        state = pipeline.load_state(text)
    except StateError as refused:
        assert refused.path in newer and "not JSON" in refused.message
        return
    assert state.foreign == tuple(sorted(newer))
    again = json.loads(state.to_json())
    assert {k: again[k] for k in newer} == newer
    assert pipeline.load_state(state.to_json()) == state


def test_now_must_be_finite() -> None:
    with pytest.raises(ValueError, match="finite"):
        build_pipeline().run(make(), float("nan"), GuardState())


def test_a_not_yet_says_when_to_ask_again() -> None:
    """min_age's "no" carries the time the pod is old enough; a final "no" carries none."""
    young = make(pod_created_at=T0 - 100, expected_cold_start_s=300)
    held, _ = build_pipeline().run(young, T0, GuardState())
    assert isinstance(held, Suppressed) and held.guardrail == "min_age"
    assert held.retry_at == T0 + 200
    _, state = build_pipeline().run(make(), T0, GuardState())
    again, _ = build_pipeline().run(make(), T0 + 1, state)
    assert isinstance(again, Suppressed) and again.guardrail == "idempotency"
    assert again.retry_at is None


def test_an_earlier_not_yet_waits_for_a_later_one() -> None:
    """The kill switch says "any time"; min_age behind it knows better: ask when both may pass."""
    young = make(pod_created_at=T0 - 100, expected_cold_start_s=300)
    held, _ = build_pipeline().run(young, T0, engage(GuardState(), True))
    assert isinstance(held, Suppressed) and held.guardrail == "kill_switch"
    assert held.retry_at == T0 + 200


def test_dry_run_is_known_by_what_it_does_not_by_its_name() -> None:
    log: list[str] = []
    pipeline = Pipeline((Probe("a", None, log), Probe("rehearsal", "would", log, simulates=True)))
    held, state = pipeline.run(make(), T0, GuardState())
    assert isinstance(held, Suppressed) and held.guardrail == "rehearsal"
    assert log[-2:] == ["record a", "record rehearsal"]  # recorded as if it had run
    assert state != GuardState()
