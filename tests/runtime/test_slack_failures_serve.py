"""Issue 18 #4, as it was found: `remediator serve` (in-process, against the kube, Argo and
Slack stand-ins) deletes a stuck pod while Slack answers HTTP 200 with a non-success, its
own transient `internal_error`, or a proxy's HTML page. Such an answer used to be taken for a
permanent refusal: counted as an error, the message dropped for the pass (and, on the pass
that saw the workflow end, for good: 0 of 2 told when it hit both). Now it is tried again at
once: the act message and its end reply both go out, once, in one thread, and nothing is
counted as failed. Slack cannot run here: its failures are scripted in
tests/standins/slack_server.py."""

from __future__ import annotations

import pytest

from remediator.runtime.service import ServiceConfig
from tests.runtime.conftest import running, stuck_pod, wait_until
from tests.standins.kube_api import KubeApiServer
from tests.standins.slack_server import SlackStandin


@pytest.mark.parametrize("fault", ["internal_error", "html"])
async def test_a_deletion_is_told_through_a_200_that_is_not_a_success(
    fault: str, config: ServiceConfig, kube: KubeApiServer, slack: SlackStandin
) -> None:
    slack.fail_next(fault, times=2)  # the act message's first two tries
    kube.store.create(stuck_pod())
    async with running(config) as service:
        await wait_until(
            lambda: [r for r in service.outbox.rows() if r.state == "ended"], what="ended row"
        )
        failed = service.runtime.metrics.slack_errors.collect()[0].samples
    act, end = slack.posted()
    assert end.body.get("thread_ts") == act.ts
    assert "Succeeded" in end.body["text"]
    assert [s for s in failed if s.name.endswith("_total")] == []  # got through: not an error
