"""The service's fixtures, and a running service with its HTTP client (no watch) for the
tests that post to its listener."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import aiohttp
import pytest

from remediator.runtime.service import Service, ServiceConfig
from tests.runtime.conftest import (
    argo,
    config,
    env,
    kube,
    logs_at_debug,
    policy_file,
    running,
    slack,
)

__all__ = ["argo", "config", "env", "kube", "logs_at_debug", "policy_file", "slack"]


@pytest.fixture
async def service(config: ServiceConfig) -> AsyncIterator[Service]:
    async with running(replace(config, watch=False)) as svc:
        yield svc


@pytest.fixture
async def http(service: Service) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(f"http://127.0.0.1:{service.port}") as client:
        yield client
