"""A decision made while the watch is behind waits until the watch has caught up (issue 18).

The sources say whether their picture may lag the API server (`sources_behind`: a Pod watch
relisting, short of the API server's resourceVersion or its BOOKMARK; KubeWatch says so, in
tests/sources and tests/live). Here their answer is scripted and time is virtual: while
behind, the core holds pod deletions (guard `watch_current`) and asks again at its next
look; once caught up (and what the watch queued is fed), it decides again on the fresh
picture, where a pod that became Ready meanwhile has no decision at all."""

from __future__ import annotations

import asyncio

from remediator.executors.protocol import Submit
from remediator.runtime.backlog import Backlog
from tests.logcheck import LogRecorder
from tests.runtime.test_cluster_time import POLICY, decided
from tests.runtime.test_look_again import HUNG, READY_SOON, became_ready, six_in_engine_init
from tests.runtime.test_virtual_clock import T0, Argo, Rig, slack_ok

RELISTING = "watch Pod/llm watch failed (ProtocolError): relisting"


class Watches:
    """What the Pod watches answer when asked if they are behind (scripted)."""

    def __init__(self) -> None:
        self.why: str | None = None

    def __call__(self) -> str | None:
        return self.why


def held(logs: LogRecorder) -> list[str]:
    return [
        x["pod"]
        for x in logs.named("suppressed")
        if x["guardrail"] == "watch_current" and x["action"] == "delete-pod"
    ]


async def test_a_deletion_decided_while_behind_waits_and_is_decided_again_once_caught_up(
    logs_at_debug: LogRecorder,
) -> None:
    watches = Watches()
    rig = Rig(Argo(running=0), slack_ok(), policy=POLICY, sources_behind=watches)
    await six_in_engine_init(rig)
    await rig.at(250)
    watches.why = RELISTING  # the stream was cut: five pods become Ready meanwhile
    await rig.at(301)  # every budget lapses on the old picture...
    assert decided(rig) == []  # ...and nothing is decided: held
    assert sorted(held(logs_at_debug)) == sorted([*READY_SOON, HUNG])
    assert rig.metrics.behind._value.get() == 1
    for name in READY_SOON:  # the relist brings the news...
        rig.feed(became_ready(name, T0 + 280))
    watches.why = None  # ...and ends: caught up
    await rig.at(302)  # decided again at once (not a check interval later), on the fresh
    assert rig.metrics.behind._value.get() == 0  # picture: only the hung pod
    assert [(d.target, d.action) for d in decided(rig)] == [(HUNG, "delete-pod")]
    await rig.at(400)
    assert len(decided(rig)) == 1
    assert [c.decision.target for c in rig.argo.carried if isinstance(c, Submit)] == [HUNG]
    (said,) = logs_at_debug.named("behind: pod deletions held until the watch has caught up")
    assert said["why"] == RELISTING
    (back,) = logs_at_debug.named("caught up: held pod deletions are decided again")
    assert back["was"] == RELISTING and back["behind_s"] == 1.0  # held at 301, back at 302


async def test_caught_up_waits_for_what_the_watch_queued_meanwhile() -> None:
    """A relist's pods are queued before the watch says it has caught up: the hold ends
    only once they are fed, or a timer could still fire on the old picture."""
    watches = Watches()
    rig = Rig(Argo(running=0), slack_ok(), policy=POLICY, sources_behind=watches)
    backlog = Backlog(100)
    consume = asyncio.create_task(rig.driver.consume(backlog))
    await asyncio.sleep(0)
    try:
        watches.why = RELISTING
        rig.driver.tick()
        assert backlog.reserve(3)  # a webhook's, say: counted before it is queued
        watches.why = None  # caught up, but three inputs are still on their way
        rig.driver.tick()
        assert rig.driver.held is not None and rig.driver.held[0] == RELISTING
        backlog.release(3)
        rig.driver.tick()
        assert rig.driver.held is None
    finally:
        consume.cancel()


async def test_a_pause_holds_pod_deletions_until_the_watch_has_caught_up() -> None:
    """After a pause the session's clock waits (no timer fires), and pod deletions are held
    meanwhile too (one an alert asks for), until the watch has caught up."""
    rig = Rig(Argo(running=0), slack_ok(), policy=POLICY)
    timer = asyncio.create_task(rig.driver.timer(1.0))
    try:
        await rig.clock.advance(5)
        rig.clock.pause(90)
        await rig.clock.advance(0)
        assert rig.driver.held is not None and rig.driver.held[0].startswith("paused")
        await rig.clock.advance(10)
        assert rig.driver.held is None
    finally:
        timer.cancel()
