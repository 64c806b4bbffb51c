from __future__ import annotations

import pytest

from remediator.guard.dry_run import DryRun, DryRunConfig
from remediator.guard.state import GuardState

from .factory import T0, make


@pytest.mark.parametrize(
    ("enabled", "action", "target", "reason"),
    [
        (True, "delete-pod", "vllm-0", "dry-run: would delete-pod ml/vllm-0"),
        (True, "restart-warmup", "gpu-warmup", "dry-run: would restart-warmup ml/gpu-warmup"),
        (True, "verify-gpu-memory", "gpu-node-1", "dry-run: would verify-gpu-memory ml/gpu-node-1"),
        (True, "cordon-node", "gpu-node-1", "dry-run: would cordon-node ml/gpu-node-1"),
        (True, "notify", "vllm-0", None),  # on-call still hears what would have happened
        (False, "delete-pod", "vllm-0", None),
        (False, "notify", "vllm-0", None),
    ],
)
def test_dry_run(enabled: bool, action: str, target: str, reason: str | None) -> None:
    verdict = DryRun(DryRunConfig(enabled=enabled)).check(
        make(action=action, target=target), T0, GuardState()
    )
    assert verdict.reason == reason


def test_record_changes_nothing() -> None:
    state = GuardState()
    assert DryRun(DryRunConfig(enabled=True)).record(make(), T0, state) is state
