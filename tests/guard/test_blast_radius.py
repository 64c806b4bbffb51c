from __future__ import annotations

import pytest

from remediator.contract.decision import Decision
from remediator.guard.blast_radius import (
    BlastRadius,
    BlastRadiusConfig,
    BlastRadiusState,
    percent_cap,
    workload_cap,
)
from remediator.guard.state import GuardState

from .factory import T0, make

CONFIG = BlastRadiusConfig(max_pods=2, max_percent=25, window_s=600, max_pods_cluster=5)
STAGE = BlastRadius(CONFIG)
VLLM = "ml/Deployment/vllm"


@pytest.mark.parametrize(
    ("max_percent", "replicas", "cap"),
    [
        (25, 8, 2),
        (25, 4, 1),
        (25, 10, 2),  # 2.5 rounds down
        (25, 2, 1),  # 0.5 rounds down to 0, but one is always allowed ...
        (25, 1, 1),
        (25, 0, 1),
        (25, None, 1),  # ... and unknown size allows one
        (0, 8, 0),  # ... unless the percentage is 0
        (100, 7, 7),
        (33, 3, 1),
        (50, 3, 1),
    ],
)
def test_percent_cap_rounds_down_but_allows_one(
    max_percent: float, replicas: int | None, cap: int
) -> None:
    assert percent_cap(max_percent, replicas) == cap


@pytest.mark.parametrize(
    ("max_pods", "replicas", "cap"), [(2, 100, 2), (2, 8, 2), (3, 8, 2), (0, 100, 0), (5, 4, 1)]
)
def test_workload_cap_is_the_smaller_of_both(max_pods: int, replicas: int, cap: int) -> None:
    config = BlastRadiusConfig(max_pods=max_pods, max_percent=25.0)
    assert workload_cap(config, replicas) == cap


def _deleted(*entries: tuple[str, float]) -> GuardState:
    return GuardState({"blast_radius": BlastRadiusState(tuple(entries))})


@pytest.mark.parametrize(
    ("history", "decision", "now", "reason"),
    [
        ((), make(), T0, None),
        (((VLLM, T0),), make(target="vllm-1"), T0 + 1, None),
        (
            ((VLLM, T0), (VLLM, T0 + 1)),
            make(target="vllm-2"),
            T0 + 2,
            "blast radius: 2 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 2 (max_pods 2, 25% of 8 replicas)",
        ),
        (
            ((VLLM, T0),),
            make(target="vllm-1", replicas=4),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 1 (max_pods 2, 25% of 4 replicas)",
        ),
        (
            ((VLLM, T0),),
            make(target="vllm-1", replicas=None),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Deployment/vllm in the last 600s; "
            "cap 1 (max_pods 2, 25% of unknown replicas)",
        ),
        (((VLLM, T0), (VLLM, T0 + 1)), make(target="vllm-2"), T0 + 600, None),  # first one aged out
        (((VLLM, T0), (VLLM, T0 + 1)), make(workload="ml/Deployment/other"), T0 + 2, None),
        (
            tuple((f"ml/Deployment/w{i}", T0 + i) for i in range(5)),
            make(workload="ml/Deployment/w9"),
            T0 + 10,
            "blast radius: 5 pod deletion(s) or hedge(s) cluster-wide in the last 600s; "
            "cap 5 (max_pods_cluster)",
        ),
        (tuple((f"ml/Deployment/w{i}", T0 + i) for i in range(5)), make(), T0 + 600, None),
        # a pod with no owner on record counts as its own workload
        (
            (("ml/Pod/bare", T0),),
            make(target="bare", workload=None, replicas=None),
            T0 + 1,
            "blast radius: 1 pod deletion(s) or hedge(s) in ml/Pod/bare in the last 600s; "
            "cap 1 (max_pods 2, 25% of unknown replicas)",
        ),
        (((VLLM, T0), (VLLM, T0)), make(action="restart-warmup"), T0, None),
        (((VLLM, T0), (VLLM, T0)), make(action="notify"), T0, None),
    ],
)
def test_check(
    history: tuple[tuple[str, float], ...], decision: Decision, now: float, reason: str | None
) -> None:
    assert STAGE.check(decision, now, _deleted(*history)).reason == reason


def test_record_appends_and_drops_what_left_the_window() -> None:
    state = _deleted((VLLM, T0 - 600), (VLLM, T0 - 599))
    after = STAGE.record(make(workload="ml/Deployment/b"), T0, state)
    assert after.of("blast_radius", BlastRadiusState).deletions == (
        (VLLM, T0 - 599),
        ("ml/Deployment/b", T0),
    )


def test_record_ignores_other_actions() -> None:
    assert STAGE.record(make(action="restart-warmup"), T0, GuardState()) == GuardState()


def test_a_pod_hung_on_a_node_verified_unsettled_is_neither_capped_nor_counted() -> None:
    """The cause is known (the node's GPU memory) and the pod serves nothing: capped, its
    replacement, which lands on the same node, waited its turn behind every other."""
    full = _deleted((VLLM, T0), (VLLM, T0 + 1))
    on_bad_node = make(target="vllm-2", unsettled_node="gpu-node-3")
    assert STAGE.check(on_bad_node, T0 + 2, full).reason is None
    assert STAGE.record(on_bad_node, T0 + 2, full) == full  # nothing counted
    assert STAGE.check(make(target="vllm-3"), T0 + 2, full).reason is not None  # others are
