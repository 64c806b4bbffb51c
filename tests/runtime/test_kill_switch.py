"""The kill-switch file (the mounted ConfigMap key) stops actions live, and lets them resume."""

from __future__ import annotations

from pathlib import Path

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import KubeApiServer


async def test_kill_switch_file_flips_suppression(
    config: ServiceConfig, kube: KubeApiServer, argo: ArgoStandin
) -> None:
    switch = Path(str(config.runtime.kill_switch_file))
    switch.write_text("on\n")
    kube.store.create(stuck_pod("vllm-llama-70b-0"))
    async with running(config) as service:

        def held() -> float:
            value = service.registry.get_sample_value(
                "remediator_suppressed_total", {"action": "delete-pod", "guardrail": "kill_switch"}
            )
            return value or 0.0

        await wait_until(held, what="a kill_switch suppression")
        assert service.outbox.rows() == []
        assert service.registry.get_sample_value("remediator_kill_switch_engaged") == 1.0

        switch.write_text("off\n")
        await wait_until(
            lambda: service.registry.get_sample_value("remediator_kill_switch_engaged") == 0.0,
            what="switch off",
        )
        other = stuck_pod("vllm-llama-70b-1")
        other["metadata"]["ownerReferences"][0]["name"] = "vllm-llama-70b-b"
        kube.store.create(other)
        rows = await wait_until(service.outbox.rows, what="a decision after the switch is off")
    assert [r.decision.target for r in rows] == ["vllm-llama-70b-1"]


async def test_missing_file_is_off_and_garbage_is_on(
    config: ServiceConfig, kube: KubeApiServer
) -> None:
    switch = Path(str(config.runtime.kill_switch_file))
    assert not switch.exists()
    async with running(config) as service:
        gauge = "remediator_kill_switch_engaged"
        assert service.registry.get_sample_value(gauge) == 0.0
        switch.write_text("maybe")  # neither on nor off: fail safe
        await wait_until(lambda: service.registry.get_sample_value(gauge) == 1.0)
        switch.unlink()
        await wait_until(lambda: service.registry.get_sample_value(gauge) == 0.0)
