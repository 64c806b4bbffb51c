"""Issue 18 #7: the outbox worker schedules its polls and retries on the monotonic clock, so
a step of the local wall clock (NTP, a VM resumed) right after a submit neither stops the
polls for an hour (−1 h) nor fires them on every pass (+1 h). The virtual clock steps the
wall clock alone (`step_wall`); the monotonic clock and every sleeper go on as before."""

from __future__ import annotations

import pytest

from remediator.executors.protocol import Finished, Poll, Submit, Tell, Unavailable
from tests.runtime.test_virtual_clock import T0, Argo, Rig, pod, slack_ok

PASSES = 40  # one worker pass a second, 40 s in all


async def passes(rig: Rig, n: int = PASSES, every_s: float = 1.0) -> None:
    for _ in range(n):
        await rig.clock.advance(every_s)
        await rig.worker.step()
        await rig.worker.idle()


def polls(rig: Rig) -> int:
    return sum(isinstance(c, Poll) for c in rig.argo.carried)


@pytest.mark.parametrize("step_s", [-3600.0, 3600.0])
async def test_polls_keep_their_schedule_when_the_wall_clock_steps(step_s: float) -> None:
    rig = Rig(Argo(running=1000), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)  # submitted; the first look is due at once
    rig.clock.step_wall(step_s)
    await passes(rig)
    assert polls(rig) == PASSES // 5  # every poll_s (5 s) of monotonic time, no more, no less


@pytest.mark.parametrize("step_s", [-3600.0, 3600.0])
async def test_the_end_reply_is_told_whatever_the_wall_clock_did(step_s: float) -> None:
    rig = Rig(Argo(running=3), slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)
    rig.clock.step_wall(step_s)
    await passes(rig)
    assert [r.state for r in rig.outbox.rows()] == ["ended"]
    told = [c.note for c in rig.slack.carried if isinstance(c, Tell)]
    assert isinstance(told[-1], Finished)


async def test_a_retry_after_an_outage_is_not_put_off_by_a_wall_clock_step_back() -> None:
    argo = Argo(submit=Unavailable("argo down"))
    rig = Rig(argo, slack_ok())
    rig.feed(pod("vllm-0", started=T0))
    await rig.at(61)  # the first try: Argo down; the next in 2 s (monotonic)
    rig.clock.step_wall(-3600.0)
    argo.submit = None  # Argo is back
    await passes(rig, n=3)
    assert sum(isinstance(c, Submit) for c in rig.argo.carried) == 2
    assert [r.state for r in rig.outbox.rows()] == ["submitted"]
