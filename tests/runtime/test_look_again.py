"""Look again before acting (issue 18, #2): a timer that fires while serve was paused, or on
a picture the watch has not brought up to date, never deletes a pod that became Ready.

The driver holds the session's clock after a pause until the watch has caught up, and the
worker reads the pod once more (a quorum read, judged by the core) just before it submits
a delete: a pod no longer stuck is spared, told and counted. The other side of each is
scripted here (the virtual clock, a scripted look); tests/live runs both against the real
control plane."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from remediator.contract.decision import Decision
from remediator.executors.protocol import Spared, Submit, Tell
from tests.runtime.test_cluster_time import POLICY, decided
from tests.runtime.test_virtual_clock import T0, Argo, Rig, iso, pod, slack_ok

READY_SOON = [f"vllm-{i}" for i in range(5)]
HUNG = "vllm-hung"


def became_ready(name: str, at: float) -> dict[str, Any]:
    """The pod of `pod(name, started=T0)`, Ready at `at` (the kubelet's write, stamped)."""
    doc = copy.deepcopy(pod(name, started=T0))
    for cond in doc["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond.update(status="True", lastTransitionTime=iso(at))
    doc["status"]["containerStatuses"][0]["ready"] = True
    doc["metadata"]["managedFields"][0]["time"] = iso(at)
    return doc


async def six_in_engine_init(rig: Rig) -> None:
    for name in [*READY_SOON, HUNG]:
        rig.feed(pod(name, started=T0))  # 300 s engine-init budget


async def test_a_pause_fires_no_timer_before_the_watch_has_caught_up() -> None:
    rig = Rig(Argo(), slack_ok(), policy=POLICY)
    await six_in_engine_init(rig)
    timer = asyncio.create_task(rig.driver.timer(1.0))
    try:
        await rig.clock.advance(250)
        rig.clock.pause(90)  # SIGSTOP for 90 s: five pods become Ready at 280 s meanwhile
        await rig.clock.advance(0)  # SIGCONT: the overdue timer runs first...
        for name in READY_SOON:  # ...then the watch's news, still in the socket
            rig.feed(became_ready(name, T0 + 280))
        assert decided(rig) == [] and rig.driver.behind is not None
        await rig.clock.advance(10)  # caught up: the clock moves on
    finally:
        timer.cancel()
    assert rig.driver.behind is None
    assert [(d.target, d.action) for d in decided(rig)] == [(HUNG, "delete-pod")]


def spare_the_ready(ready: set[str]) -> Any:
    async def look(d: Decision) -> str | None:
        return f"llm/{d.target} became Ready" if d.target in ready else None

    return look


async def test_a_delete_is_looked_at_again_and_a_pod_no_longer_stuck_is_spared() -> None:
    rig = Rig(Argo(running=0), slack_ok(), policy=POLICY)
    rig.worker.look = spare_the_ready(set(READY_SOON))  # the watch never told (a gap)
    await six_in_engine_init(rig)
    await rig.at(301)
    assert len(decided(rig)) == 6  # decided on the stale picture: all six over budget
    submitted = [c.decision.target for c in rig.argo.carried if isinstance(c, Submit)]
    assert submitted == [HUNG]
    spared = {r.decision.target: (r.state, r.phase) for r in rig.outbox.rows()}
    assert spared == {**dict.fromkeys(READY_SOON, ("ended", "spared")), HUNG: spared[HUNG]}
    told = [c.note for c in rig.slack.carried if isinstance(c, Tell)]
    assert sorted(n.decision.target for n in told if isinstance(n, Spared)) == READY_SOON
    assert rig.counted("executions", action="delete-pod", result="spared") == 5


async def test_a_look_that_cannot_reach_the_api_server_waits_and_looks_again() -> None:
    rig = Rig(Argo(running=0), slack_ok(), policy=POLICY)
    tries: list[str] = []

    async def unreachable_then_ready(d: Decision) -> str | None:
        tries.append(d.target)
        if len(tries) == 1:
            raise ConnectionRefusedError("the API server is away (a watch outage)")
        return "became Ready"

    rig.worker.look = unreachable_then_ready
    rig.feed(pod(HUNG, started=T0))
    await rig.at(301)
    assert [r.state for r in rig.outbox.rows()] == ["pending"] and not rig.argo.carried
    await rig.at(400)
    assert [(r.state, r.phase) for r in rig.outbox.rows()] == [("ended", "spared")]
    assert tries == [HUNG, HUNG] and not rig.argo.carried


@pytest.fixture(autouse=True)
def _no_leak() -> None:
    """Each test builds its own rig and pods (the builders return fresh objects)."""
