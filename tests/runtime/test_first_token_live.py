"""The first-token probe in the service: a pod turns Ready on the watch, serve probes it (the
stand-in vLLM on loopback), the first token closes its timeline."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import NS, iso, running, stuck_pod, wait_until
from tests.standins.kube_api import KubeApiServer
from tests.standins.vllm_server import VllmStandin

MODEL = "meta-llama/Llama-3.1-70B-Instruct"


async def test_a_ready_pod_is_probed_and_its_timeline_closed(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    with VllmStandin(model=MODEL, first_token_s=0.2) as vllm:
        pod = stuck_pod("vllm-0", started_ago_s=200)
        pod["spec"]["containers"][0]["args"] += ["--port", str(vllm.port)]
        pod["status"]["podIP"] = "127.0.0.1"
        ready = time.time() - 1
        pod["status"]["conditions"][1].update(status="True", lastTransitionTime=iso(ready))
        kube.store.create(pod)
        policy = tmp_path / "probe.yaml"
        policy.write_text("first_token_probe: {enabled: true, timeout_s: 5}\n")
        async with running(replace(config, policy=str(policy))) as service:

            def serving() -> object:
                t = service.session.tracker.current(NS, "vllm-0")
                return t is not None and t.state() == "serving" and t

            t = await wait_until(serving, what="the first token")
            doc = t.to_json()
            ok = service.registry.get_sample_value(
                "remediator_first_token_probes_total", {"result": "ok"}
            )
    assert len(vllm.requests) == 1 and ok == 1
    # Ready (to the second) → the probe's first token, 0.2 s after it was asked at the earliest
    assert doc["state"] == "serving" and doc["phases"]["first_token"] >= 0.2
    assert 195 <= doc["phases"]["engine_init"] <= 201
