"""A pod deleted while the watch was away (issue 10, #7): the relist after the 410 reconciles
it, and no delete workflow is submitted for a pod that is no longer there.

The service runs on a virtual clock: the pod's budget cannot lapse while the test cuts the
watch and deletes the pod, however slow the machine; the test moves the clock past it after."""

from __future__ import annotations

from pathlib import Path

from remediator.runtime.clock import VirtualClock
from remediator.runtime.service import ServiceConfig
from remediator.timeline.model import PodTimeline
from tests.runtime.conftest import NS, running, stuck_pod, wait_until
from tests.standins.argo_server import ArgoStandin
from tests.standins.kube_api import Fault, KubeApiServer
from tests.standins.slack_server import SlackStandin

BUDGET_S = 4.0
POLICY = f"""
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm]
  budgets: {{engine_init: {BUDGET_S:g}, container_start: {BUDGET_S:g}}}
  checks: 1
  check_interval_s: 1
  expected_cold_start_s: 0
  adaptive: {{enabled: false}}
"""


def _lists(kube: KubeApiServer) -> list[object]:
    """The Pod watch's lists (not its watches, nor the probes' lists of one item)."""
    return [
        r
        for r in kube.sent("GET", "/pods")
        if not r.query.get("watch") and r.query.get("limit") != ["1"]
    ]


def _state(timeline: PodTimeline | None) -> str | None:
    return None if timeline is None else timeline.state()


async def test_a_pod_deleted_during_a_watch_gap_gets_no_workflow(
    config: ServiceConfig,
    policy_file: Path,
    kube: KubeApiServer,
    argo: ArgoStandin,
    slack: SlackStandin,
) -> None:
    policy_file.write_text(POLICY)
    clock = VirtualClock()
    uid = kube.store.create(stuck_pod())["metadata"]["uid"]
    pods = kube.resource("v1", "pods")
    async with running(config, clock=clock) as service:
        tracker = service.session.tracker
        await wait_until(lambda: tracker.get(uid) is not None, what="pod tracked")
        # The gap: every pod watch request fails while the pod is deleted and the server's
        # history compacted, so the watch can resume only by relisting.
        kube.faults.append(Fault("GET", "/pods", 500, times=10_000))
        kube.close_watches()
        await wait_until(
            lambda: service.registry.get_sample_value(
                "remediator_watch_restarts_total", {"kind": "Pod", "reason": "error"}
            ),
            what="pod watch failing",
        )
        kube.store.delete(pods, NS, "vllm-llama-70b-0", {}, dry=False)
        kube.store.compact()
        listed = len(_lists(kube))  # failed relists (the watch relists after an error)
        kube.faults.clear()
        await wait_until(lambda: len(_lists(kube)) > listed, what="relisted")
        # Past the budget and a check interval, maybe before the list is in (a list sent as
        # the faults were cleared failed, and the next comes after a back-off): pod deletions
        # are held while the watch relists, so nothing may be decided meanwhile either.
        await clock.advance(BUDGET_S + 1.5)
        assert service.outbox.rows() == []
        await wait_until(lambda: _state(tracker.get(uid)) == "deleted", what="relist applied")
        await clock.advance(1.5)  # held deletions decided again, on the relist's picture
        assert service.outbox.rows() == []
    assert argo.workflows == {}
    assert slack.posted() == []
