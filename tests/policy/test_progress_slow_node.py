"""A pod on a slow node (a throttled GPU, a slow local disk) runs every stretch of its engine
init slower than its siblings: judged by its siblings' times alone it would be deleted in
the first stretch longer than their limit. Its pace so far widens its limit (stall.pace_of):
it comes up untouched, and a hang there is still found. Real vLLM lines at made-up times, as
in test_progress_first_step.py."""

from __future__ import annotations

import pytest

from tests.policy.builders import T0, pod
from tests.policy.conftest import make_run
from tests.policy.test_progress import READY, _name, _start, _uid
from tests.policy.test_progress_first_step import POLICY, WITH_BANNER, _deleted_after, _siblings


def _slow(k: float) -> list[tuple[float, str]]:
    """The siblings' lines from a node whose engine inits take `k` times as long."""
    return [(k * at, line) for at, line in WITH_BANNER]


SLOW = 6.0


def test_a_pod_six_times_as_slow_everywhere_comes_up_untouched() -> None:
    """Its weights are in at 240 s, past the siblings' 185 s limit for them (3 × 1.54 × 40 s)
    and its two checks; its first step line at 30 s (siblings 5 s) widens that 1.71 times
    ((30 + 30) over (5 + 30)). Each stretch after is widened by its pace so far. Ready at
    660 s, over the 600 s phase budget too."""
    run = make_run(POLICY)
    created = _siblings(run, WITH_BANNER)
    started = _start(run, 9, created, _slow(SLOW))
    run.at(T0 + started + SLOW * READY - 1)
    assert run.decisions == []
    run.feed(pod(_name(9), _uid(9), created=created, scheduled=created + 1, started=started,
                 ready=started + SLOW * READY))  # fmt: skip
    run.at(T0 + started + 3600)
    assert run.decisions == []


def test_a_hang_on_a_slow_node_is_still_found_and_the_reason_says_why_later() -> None:
    """Five times slow up to sizing its KV cache (310 s), then silent: the siblings' 37 s to
    graphs captured give a 171 s limit, widened by its pace so far, (310 + 30) over its
    siblings' (62 + 30): deleted two checks after 310 + 3.7 × 171 s."""
    run = make_run(POLICY)
    started = _start(run, 9, _siblings(run, WITH_BANNER), _slow(5.0)[:7])
    run.at(T0 + started + 3600)
    pace = (310 + 30) / (62 + 30)
    assert _deleted_after(run, started) == pytest.approx(310 + pace * 3 * 1.54 * 37 + 20, rel=0.01)
    reason = run.decisions[0].reason
    assert "stalled in vLLM step kv_cache (timed as cuda_graphs)" in reason
    assert f"widened {pace:.3g}× by its own pace so far against its siblings'" in reason
