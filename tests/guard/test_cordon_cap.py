from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remediator.contract.errors import ConfigError
from remediator.guard import build_pipeline
from remediator.guard.config import GuardConfig
from remediator.guard.cordon_cap import CordonCap, CordonCapConfig, CordonCapState
from remediator.guard.state import GuardState, StateError, prune
from remediator.policy_file import load_policy

from .factory import T0, make

HOUR = 3600.0


def cordon(node: str, at: float = T0) -> object:
    return make(action="cordon-node", namespace="", target=node, uid=None, workload=None,
                incident=f"cordon-{node}", at=at)  # fmt: skip


def _let_through(stage: CordonCap, nodes_at: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Each cordon in turn through the stage alone; the ones it let through and counted."""
    state, through = GuardState(), []
    for node, at in nodes_at:
        decision = cordon(node, at)
        if stage.check(decision, at, state).passed:  # type: ignore[arg-type]
            before = prune(state.of("cordon_cap", CordonCapState).cordoned, at, HOUR)
            state = stage.record(decision, at, state)  # type: ignore[arg-type]
            if node not in before:
                through.append((node, at))
    return through


def test_past_the_cap_a_cordon_waits_for_the_oldest_to_leave_the_window() -> None:
    stage = CordonCap(CordonCapConfig(max_nodes=2, window_s=HOUR))
    state = GuardState()
    for i, node in enumerate(("gpu-1", "gpu-2")):
        assert stage.check(cordon(node), T0 + i, state).passed  # type: ignore[arg-type]
        state = stage.record(cordon(node), T0 + i, state)  # type: ignore[arg-type]
    held = stage.check(cordon("gpu-3"), T0 + 60, state)  # type: ignore[arg-type]
    assert held.reason is not None and held.retry_at == T0 + HOUR
    assert "2 node(s) cordoned in the last 1h, cap 2 (max_nodes)" in held.reason
    assert "kubectl cordon gpu-3" in held.reason
    assert stage.check(cordon("gpu-3"), T0 + HOUR, state).passed  # type: ignore[arg-type]


def test_a_node_cordoned_already_is_let_through_and_not_counted_again() -> None:
    stage = CordonCap(CordonCapConfig(max_nodes=1, window_s=HOUR))
    state = stage.record(cordon("gpu-1"), T0, GuardState())  # type: ignore[arg-type]
    assert stage.check(cordon("gpu-1"), T0 + 10, state).passed  # type: ignore[arg-type]
    again = stage.record(cordon("gpu-1"), T0 + 10, state)  # type: ignore[arg-type]
    assert again.of("cordon_cap", CordonCapState).cordoned == {"gpu-1": T0}
    assert not stage.check(cordon("gpu-2"), T0 + 20, again).passed  # type: ignore[arg-type]


def test_other_actions_pass_and_leave_no_trace() -> None:
    stage = CordonCap(CordonCapConfig(max_nodes=0))
    for decision in (make(), make(action="notify"), make(action="hedge-pod")):
        assert stage.check(decision, T0, GuardState()).passed
        assert stage.record(decision, T0, GuardState()) == GuardState()


def test_max_nodes_zero_cordons_nothing() -> None:
    assert _let_through(CordonCap(CordonCapConfig(max_nodes=0)), [("gpu-1", T0)]) == []


def test_the_pipeline_remembers_cordons_across_a_restart() -> None:
    config = GuardConfig().with_stage("cordon_cap", CordonCapConfig(max_nodes=1))
    pipeline = build_pipeline(config)
    got, state = pipeline.run(cordon("gpu-1"), T0, GuardState())  # type: ignore[arg-type]
    assert got == cordon("gpu-1")
    restored = pipeline.load_state(state.to_json())
    held, _ = pipeline.run(cordon("gpu-2", T0 + 120), T0 + 120, restored)  # type: ignore[arg-type]
    assert getattr(held, "guardrail", None) == "cordon_cap"


def test_stored_state_that_does_not_fit_is_refused() -> None:
    with pytest.raises(StateError, match="cordon_cap.cordoned.gpu-1"):
        CordonCapState.from_doc({"cordoned": {"gpu-1": "yesterday"}}, "cordon_cap")


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=4),
    st.lists(
        st.tuples(
            st.sampled_from([f"gpu-{i}" for i in range(8)]),
            st.floats(min_value=0, max_value=6 * HOUR),
        ),  # fmt: skip
        max_size=40,
    ),
)
def test_no_window_holds_more_new_cordons_than_the_cap(
    max_nodes: int, draws: list[tuple[str, float]]
) -> None:
    """Whatever verdicts come, in time order: in any window, at most `max_nodes` cordons
    are counted (a node's repeat within the window is let through uncounted)."""
    stage = CordonCap(CordonCapConfig(max_nodes=max_nodes, window_s=HOUR))
    nodes_at = sorted(((node, T0 + at) for node, at in draws), key=lambda d: d[1])
    through = _let_through(stage, nodes_at)
    for _, start in through:
        inside = [node for node, at in through if start <= at < start + HOUR]
        assert len(inside) <= max_nodes


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ("{window_s: 60}", "guardrails.cordon_cap.window_s: must not be below 3600, got 60"),
        ("{max_nodes: -1}", "guardrails.cordon_cap.max_nodes: must not be negative, got -1"),
        ("{max_nodes: 2.5}", "guardrails.cordon_cap.max_nodes: expected a whole number"),
        ("{nodes: 2}", "guardrails.cordon_cap.nodes: unknown key; known: max_nodes, window_s"),
    ],
)
def test_a_wrong_cap_is_refused_with_its_path(section: str, error: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_policy(f"guardrails: {{cordon_cap: {section}}}")
