"""The kill-switch file (the mounted ConfigMap key) stops actions live, and lets them resume."""

from __future__ import annotations

import asyncio
import codecs
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remediator.runtime.kill_switch_file import OFF, ON, decode, read_switch
from remediator.runtime.service import Service, ServiceConfig
from tests.logcheck import LogRecorder
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


# Issue 18 #3: a switch that cannot be read as text was never engaged (UnicodeDecodeError
# escaped the poll; at start it stopped serve). Unreadable, undecodable or unclear means on.
UNCLEAR: dict[str, bytes | None] = {
    "utf-16 on, no BOM": "on".encode("utf-16-le"),  # decodes, but to no word it knows
    "not UTF-8": b"\x80\x81on\xff",
    "a directory": None,
    "a whole file of it": b"on\n" * 1000,
}


@pytest.mark.parametrize("content", list(UNCLEAR.values()), ids=list(UNCLEAR))
async def test_a_switch_that_cannot_be_read_is_on_and_said_once(
    content: bytes | None, config: ServiceConfig, kube: KubeApiServer, logs_at_debug: LogRecorder
) -> None:
    switch = Path(str(config.runtime.kill_switch_file))
    if content is None:
        switch.mkdir()
    else:
        switch.write_bytes(content)
    kube.store.create(stuck_pod("vllm-llama-70b-0"))
    async with running(config) as service:
        await wait_until(lambda: held(service), what="a kill_switch suppression")
        assert service.outbox.rows() == []
        assert service.registry.get_sample_value("remediator_kill_switch_engaged") == 1.0
        assert service.registry.get_sample_value("remediator_kill_switch_unclear") == 1.0
        await wait_until(lambda: service.runtime.ready()[0], what="ready: still takes webhooks")
        assert "kill switch engaged" in service.runtime.ready()[1]
        await asyncio.sleep(0.3)  # several polls: still one line
        assert service.runtime.supervisor.status() is None
    said = [x for x in logs_at_debug.lines if x["msg"].startswith("kill switch file")]
    assert len(said) == 1 and said[0]["level"] == "error", said


@pytest.mark.parametrize(
    "content",
    ["on".encode("utf-16"), codecs.BOM_UTF8 + b"ON\r\n", "on\n".encode("utf-16-be")],
    ids=["utf-16 with BOM", "utf-8 with BOM", "utf-16-be, no BOM"],
)
async def test_on_in_another_encoding_is_on(
    content: bytes, config: ServiceConfig, kube: KubeApiServer
) -> None:
    """A BOM says how to read it; without one, UTF-16 is no word it knows: on all the same."""
    Path(str(config.runtime.kill_switch_file)).write_bytes(content)
    kube.store.create(stuck_pod("vllm-llama-70b-0"))
    async with running(config) as service:
        await wait_until(lambda: held(service), what="a kill_switch suppression")
        assert service.registry.get_sample_value("remediator_kill_switch_engaged") == 1.0
        assert service.outbox.rows() == []


async def test_a_switch_read_again_after_it_was_unreadable_is_obeyed(
    config: ServiceConfig, kube: KubeApiServer, logs_at_debug: LogRecorder
) -> None:
    switch = Path(str(config.runtime.kill_switch_file))
    switch.write_bytes(b"\xff\xfe\xff\xdb")  # a UTF-16 BOM, then half a surrogate pair
    async with running(config) as service:
        gauge = service.registry.get_sample_value
        await wait_until(lambda: gauge("remediator_kill_switch_unclear") == 1.0)
        assert gauge("remediator_kill_switch_engaged") == 1.0
        switch.write_text("off\n")
        await wait_until(lambda: gauge("remediator_kill_switch_engaged") == 0.0)
        assert gauge("remediator_kill_switch_unclear") == 0.0
        assert "kill switch" not in service.runtime.ready()[1]
    assert logs_at_debug.named("kill switch file clear again")


def held(service: Service) -> float:
    value = service.registry.get_sample_value(
        "remediator_suppressed_total", {"action": "delete-pod", "guardrail": "kill_switch"}
    )
    return value or 0.0


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=40) | st.sampled_from([b"off", b"OFF\n", b"\xef\xbb\xbfoff", b""]))
def test_any_bytes_are_read_without_an_error_and_only_a_clear_off_releases(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "switch"
    path.write_bytes(data)
    reading = read_switch(str(path))
    try:
        text: str | None = decode(data).strip().lower()
    except UnicodeDecodeError:
        text = None
    assert reading.engaged == (text not in OFF)
    assert (reading.unclear is None) == (text in ON | OFF)
