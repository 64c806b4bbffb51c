"""The loop the verify step closes: it judges GPU memory, posts its verdict to /events, and
the service tells on-call and (when the policy says so) cordons the node."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import POLICY, running, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.slack_server import SlackStandin
from tests.steps.conftest import TRACE_COLUMNS
from tests.steps.trace import phases, trace_lines

REPO = Path(__file__).resolve().parents[2]
START = phases("start")
BURST = (START["steady_4s"] - 1, START["free_burst"] + 0.5)  # the real H200 trace's 8 GiB burst
NODE = "gpu-node-7"


def verify_step(csv: Path, url: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", "remediator", "step", "verify-gpu-memory",
        "--from-file", str(csv), "--columns", TRACE_COLUMNS, "--max-spread-mib", "256",
        "--node", NODE, "--incident", "image-update-abc", "--report-to", url,
    ]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, env=os.environ.copy(), capture_output=True, text=True)


async def test_an_unstable_verdict_is_told_and_the_node_cordoned(
    config: ServiceConfig, argo: ArgoStandin, slack: SlackStandin, tmp_path: Path
) -> None:
    policy = tmp_path / "cordon.yaml"
    policy.write_text(POLICY + "gpu_memory: {cordon: true}\n")
    burst = tmp_path / "burst.csv"
    burst.write_text("\n".join(trace_lines(*BURST)) + "\n")
    async with running(replace(config, policy=str(policy), watch=False)) as service:
        url = f"http://127.0.0.1:{service.port}/events"
        step = await asyncio.to_thread(verify_step, burst, url)
        assert step.returncode == 1, step.stderr  # unstable: the step's own verdict stands
        assert '"reported": true' in step.stdout
        rows = await wait_until(
            lambda: (
                {r.decision.action: r for r in service.outbox.rows() if r.state == "ended"}
                if len([r for r in service.outbox.rows() if r.state == "ended"]) >= 2
                else None
            ),
            what="notify and cordon carried out",
        )
        await wait_until(lambda: slack.posted(), what="on-call told")
    assert set(rows) == {"notify", "cordon-node"}
    assert rows["cordon-node"].decision.target == NODE
    (wf,) = argo.workflows.values()
    assert wf["spec"]["workflowTemplateRef"]["name"] == "cordon-gpu-node"
    told = " ".join(p.body["text"] for p in slack.posted())
    assert NODE in told and "MiB" in told


async def test_a_stable_verdict_changes_nothing_and_a_dead_service_does_not_fail_the_step(
    config: ServiceConfig, argo: ArgoStandin, slack: SlackStandin, tmp_path: Path
) -> None:
    steady = tmp_path / "steady.csv"
    steady.write_text("\n".join(trace_lines(START["generate_16_static_cache"], START["steady_4s"])))
    async with running(replace(config, watch=False)) as service:
        url = f"http://127.0.0.1:{service.port}/events"
        step = await asyncio.to_thread(verify_step, steady, url)
        assert (step.returncode, '"reported": true' in step.stdout) == (0, True)
        inputs = service.registry.get_sample_value("remediator_inputs_total", {"source": "http"})
        assert inputs == 1.0
        assert service.outbox.rows() == []
    # nobody listening any more: the verdict is still the step's result, the post is logged
    step = await asyncio.to_thread(verify_step, steady, url)
    assert step.returncode == 0 and '"reported": false' in step.stdout
    assert "verdict not reported" in step.stderr
    assert argo.workflows == {} and slack.posted() == []
