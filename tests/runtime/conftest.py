"""The service, in-process, against the stand-ins: kube API (with watch), Argo, Slack."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from remediator.runtime.clock import Clock
from remediator.runtime.embedded import RuntimeSettings
from remediator.runtime.leader import Leadership, LeaseSettings
from remediator.runtime.service import Service, ServiceConfig
from remediator.sources.kube_watch import WatchSettings
from tests.logcheck import LogRecorder, strict_logging
from tests.standins.argo_server import ArgoStandin
from tests.standins.fixtures import argo_fixture, slack_fixture
from tests.standins.kube_api import KubeApiServer
from tests.standins.slack_server import SlackStandin

ARGO_TOKEN = "argo-runtime-token-1c2d"
SLACK_TOKEN = "xoxb-runtime-test"
WEBHOOK_TOKEN = "webhook-runtime-token-9e8f"
CHANNEL = "#llm-oncall"
NS = "llm"

# Short budgets so a stuck pod is found within seconds; nothing else is loosened.
POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm]
  budgets: {engine_init: 1, container_start: 1}
  checks: 1
  check_interval_s: 1
  expected_cold_start_s: 0
  adaptive: {enabled: false}
"""


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stuck_pod(name: str = "vllm-llama-70b-0", started_ago_s: float = 0.0) -> dict[str, Any]:
    """A 70B vLLM pod (TP=2) whose engine started and never became Ready."""
    now = time.time()
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app": "vllm-inference", "model": "llama-3.1-70b"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "vllm-llama-70b",
                    "uid": "5d1c8f8e-2b1a-4c3d-9e8f-0a1b2c3d4e5f",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "gpu-node-1",
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.8.5",
                    "args": [
                        "--model",
                        "meta-llama/Llama-3.1-70B-Instruct",
                        "--tensor-parallel-size",
                        "2",
                    ],
                    "resources": {"limits": {"nvidia.com/gpu": "2"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastTransitionTime": iso(now - started_ago_s - 5),
                },
                {
                    "type": "Ready",
                    "status": "False",
                    "lastTransitionTime": iso(now - started_ago_s - 5),
                },
            ],
            "containerStatuses": [
                {
                    "name": "vllm",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": iso(now - started_ago_s)}},
                }
            ],
        },
    }


async def wait_until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll `check` until truthy; fail (never hang) after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or check}")


@pytest.fixture(autouse=True)
def logs_at_debug() -> Iterator[LogRecorder]:
    """Every test here runs with every log call live; a logging error fails the test."""
    with strict_logging(logging.DEBUG) as logs:
        yield logs
    assert logs.problems() == []


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Secrets reach the service the way the Deployment gives them: environment variables.
    monkeypatch.setenv("ARGO_TOKEN", ARGO_TOKEN)
    monkeypatch.setenv("SLACK_BOT_TOKEN", SLACK_TOKEN)
    monkeypatch.setenv("REMEDIATOR_WEBHOOK_TOKEN", WEBHOOK_TOKEN)


@pytest.fixture
def kube() -> Iterator[KubeApiServer]:
    with KubeApiServer() as api:
        api.bookmark_interval_s = 0.2
        yield api


argo = argo_fixture(ARGO_TOKEN)
slack = slack_fixture(SLACK_TOKEN, frozenset({CHANNEL}))


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def config(
    env: None,
    tmp_path: Path,
    kube: KubeApiServer,
    argo: ArgoStandin,
    slack: SlackStandin,
    policy_file: Path,
) -> ServiceConfig:
    return ServiceConfig(
        policy=str(policy_file),
        listen="127.0.0.1:0",
        state_db=str(tmp_path / "state" / "remediator.db"),
        namespaces=(NS,),
        warmup_daemonset=None,
        kubeconfig=str(kube.write_kubeconfig(tmp_path / "kubeconfig")),
        argo_server=argo.url,
        argo_poll_s=0.05,
        slack_channel=CHANNEL,
        slack_api_url=slack.url,
        runtime=RuntimeSettings(
            kill_switch_file=str(tmp_path / "kill-switch"),
            kill_switch_poll_s=0.05,
            executor_poll_s=0.1,
        ),
        watch_settings=WatchSettings(timeout_s=30, backoff_initial_s=0.05),
    )


@asynccontextmanager
async def running(
    cfg: ServiceConfig, leader: Leadership | None = None, clock: Clock | None = None
) -> AsyncIterator[Service]:
    """The service, started and stopped; on `clock` (a VirtualClock: budgets lapse only when
    the test moves it) else the system's."""
    service = Service(cfg, leader, clock)
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


def without_watch(cfg: ServiceConfig) -> ServiceConfig:
    return replace(cfg, watch=False)


LEASE = "remediator-leader"
LEASE_NS = "remediator"


def lease_settings(identity: str) -> LeaseSettings:
    """Short timings so a takeover happens within seconds; the same rules as 15/10/2."""
    return LeaseSettings(
        name=LEASE,
        namespace=LEASE_NS,
        identity=identity,
        lease_duration_s=2.0,
        renew_deadline_s=1.5,
        retry_period_s=0.2,
    )


def lease_spec(kube: KubeApiServer) -> dict[str, Any]:
    res = kube.resource("coordination.k8s.io/v1", "leases")
    spec: dict[str, Any] = kube.store.get(res, LEASE_NS, LEASE)["spec"]
    return spec
