"""The demo's controller: the embedded runtime (Driver, Outbox, Acting) unchanged, on
the simulator's virtual time, with the simulator as its Argo and Slack."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.executors.protocol import Acted, Finished, Tell
from remediator.policy_file import PolicyFile
from remediator.runtime.clock import VirtualClock
from remediator.sim.fleet.controllers import Controller, CorePolicy
from remediator.sim.fleet.demo import DEMO
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.results import RunResult
from remediator.sim.fleet.runtime_controller import RuntimePolicy, SimSlack
from remediator.sim.fleet.simulation import Simulation

SCENARIO = replace(DEMO, duration_s=2400)
Key = tuple[str, str, str, float]


def _run(ctl: Controller, seed: int) -> tuple[list[Key], RunResult]:
    decided: list[Key] = []

    def watch(what: str, now: float, obj: object) -> None:
        if what == "decision" and isinstance(obj, Decision):
            decided.append((obj.incident, obj.action, obj.target, obj.at))

    return decided, Simulation(SCENARIO, seed, ctl, observer=watch).run()


@pytest.fixture
def runtime() -> Iterator[RuntimePolicy]:
    ctl = RuntimePolicy("default", PolicyFile())
    yield ctl
    ctl.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_runtime_decides_what_the_core_decides(runtime: RuntimePolicy, seed: int) -> None:
    """The runtime adds an outbox and executors, not a different decision: the same
    decisions, at the same times, in the same order, and the same ones held."""
    core, core_result = _run(CorePolicy("default", PolicyFile()), seed)
    ran, ran_result = _run(runtime, seed)
    assert len(core) > 5 and {a for _, a, _, _ in core} >= {"delete-pod", "restart-warmup"}
    assert ran == core
    assert ran_result.held == core_result.held > 0
    assert ran_result.ready_s == core_result.ready_s


def test_every_decision_is_an_outbox_row_that_ends_told_in_slack(runtime: RuntimePolicy) -> None:
    decided, _ = _run(runtime, 1)
    rows = runtime.outbox.rows()
    assert sorted((r.incident, r.decision.action) for r in rows) == sorted(
        (incident, act) for incident, act, _, _ in decided
    )
    assert {r.state for r in rows} == {"ended"}
    posts = runtime.slack.posts
    act_ts: dict[str, str | None] = {}  # an incident's thread: its first message's
    for r in sorted(rows, key=lambda r: r.id):
        act_ts.setdefault(r.incident, r.slack_ts)
    threaded = 0
    for row in rows:
        acts = [p for p in posts if isinstance(p.note, Acted) and p.note.decision == row.decision]
        # A deletion on a node found unsettled is told in the thread of the node's incident
        # (the verification's, where the node's notice went too).
        under = row.decision.told_under
        thread = act_ts[under] if under is not None else None
        threaded += thread is not None
        assert len(acts) == 1 and acts[0].ts == row.slack_ts and acts[0].thread == thread
        if not action(row.decision.action).acts:
            assert row.phase == "notified" and row.end_ts is None
            continue
        assert row.phase == "Succeeded" and row.workflow is not None
        assert f"Workflow*: {row.workflow}" in acts[0].text
        (end,) = [p for p in posts if isinstance(p.note, Finished) and p.ts == row.end_ts]
        assert end.thread == (thread or row.slack_ts)  # the reply: in the act message's thread
        assert f"Workflow `{row.workflow}` *Succeeded*" in end.text
        assert end.at >= acts[0].at + SCENARIO.executor_delay_s  # ended once applied
    assert len(posts) == len(rows) + sum(1 for r in rows if r.end_ts is not None)
    assert threaded > 0, "the scenario has a node found unsettled, and pods deleted there"


async def test_slack_text_is_the_notifiers_message_escaped() -> None:
    d = Decision("delete-pod", "llm", "vllm-0", "stuck <!channel> & <@U1>", "stuck-1",
                 BASE_TIME + 61.0, uid="u-1")  # fmt: skip
    slack = SimSlack(VirtualClock(BASE_TIME))
    await slack.carry(Tell(Acted(d)))
    (post,) = slack.posts
    assert "*Why*: stuck &lt;!channel&gt; &amp; &lt;@U1&gt;" in post.text.splitlines()
    assert "<!channel>" not in post.text
