from __future__ import annotations

from pathlib import Path

import pytest

from remediator.contract.decision import Decision
from remediator.executors.argo import ArgoConfig, ArgoExecutor, Backoff
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import argo_fixture

TOKEN = "argo-test-token-7f3a"
POD_UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


argo = argo_fixture(TOKEN)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "argo-token"
    path.write_text(TOKEN + "\n")
    return path


def config_for(argo: ArgoStandin, token_file: Path) -> ArgoConfig:
    # A variable that is never set, so the mounted file is what is read.
    return ArgoConfig(
        host=argo.url,
        namespace="argo",
        ui_url="https://argo.example",
        token_env="REMEDIATOR_TEST_UNSET_ARGO_TOKEN",
        token_file=str(token_file),
    )


@pytest.fixture
def executor(argo: ArgoStandin, token_file: Path) -> ArgoExecutor:
    backoff = Backoff(attempts=3, initial_s=0.01)
    return ArgoExecutor(config_for(argo, token_file), backoff=backoff, poll_interval_s=0.01)


def delete_decision(**overrides: object) -> Decision:
    fields: dict[str, object] = {
        "action": "delete-pod",
        "namespace": "inference",
        "target": "vllm-llama-70b-0",
        "reason": "engine_init 75s > budget 60s (3 checks)",
        "incident": "stuck-inference-vllm-llama-70b-0-0f1e2d3c",
        "at": 1_714_557_600.0,
        "uid": POD_UID,
        "workload": "inference/StatefulSet/vllm-llama-70b",
    }
    fields.update(overrides)
    return Decision(**fields)  # type: ignore[arg-type]
