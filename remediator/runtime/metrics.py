"""The runtime's own metrics, beside the session's (timelines, decisions, suppressions)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from remediator.runtime.outbox import STATES, Outbox


@dataclass(frozen=True, slots=True)
class ActingCounters:
    """What the acting component counts (`runtime.worker.Acting`), in serve and in every
    Kafka worker alike."""

    executions: Counter
    workflows_ended: Counter
    slack_errors: Counter
    outbox_pruned: Counter

    @classmethod
    def on(cls, registry: CollectorRegistry) -> ActingCounters:
        return cls(
            executions=Counter(
                "remediator_executions_total",
                "Outbox rows carried out, by action and result (submitted, duplicate: a 409 "
                "counted as done, unavailable: Argo down, will retry, unauthorized: a 401, "
                "will retry, failed, notified, not_started: a workflow still Pending past "
                "--workflow-start-timeout, told to on-call).",
                ["action", "result"],
                registry=registry,
            ),
            workflows_ended=Counter(
                "remediator_workflows_ended_total",
                "Submitted workflows followed to their end, by action and phase.",
                ["action", "phase"],
                registry=registry,
            ),
            slack_errors=Counter(
                "remediator_slack_errors_total",
                "Slack messages not posted after the notifier's tries, by the last failure's "
                "class (ratelimited, slack_error: Slack's transient ok:false, server_error, "
                "not_slack: a proxy's page, cut_off, bad_answer, timeout, connection; refused: "
                "a permanent error). A message not posted is tried again later.",
                ["reason"],
                registry=registry,
            ),
            outbox_pruned=Counter(
                "remediator_outbox_pruned_total",
                "Closed outbox rows (ended, expired, failed and told) deleted after the "
                "retention period.",
                registry=registry,
            ),
        )


@dataclass(frozen=True, slots=True)
class RuntimeMetrics:
    executions: Counter
    workflows_ended: Counter
    slack_errors: Counter
    leader: Gauge
    kill_switch: Gauge
    kill_switch_unclear: Gauge
    queue_depth: Gauge
    behind: Gauge
    task_restarts: Counter
    outbox_pruned: Counter

    @classmethod
    def on(cls, registry: CollectorRegistry) -> RuntimeMetrics:
        acting = ActingCounters.on(registry)
        return cls(
            executions=acting.executions,
            workflows_ended=acting.workflows_ended,
            slack_errors=acting.slack_errors,
            leader=Gauge(
                "remediator_leader",
                "1 while this replica leads (executes its outbox), 0 on a standby.",
                ["identity"],
                registry=registry,
            ),
            kill_switch=Gauge(
                "remediator_kill_switch_engaged",
                "1 while the kill-switch file says on (or cannot be read clearly).",
                registry=registry,
            ),
            kill_switch_unclear=Gauge(
                "remediator_kill_switch_unclear",
                "1 while the kill-switch file cannot be read, decoded or understood (then "
                "the switch is on).",
                registry=registry,
            ),
            queue_depth=Gauge(
                "remediator_input_queue_depth",
                "Inputs decoded and waiting for the core (webhooks get 503 at the limit).",
                registry=registry,
            ),
            behind=Gauge(
                "remediator_behind",
                "1 while pod deletions are held because the picture may lag the cluster's "
                "(a Pod watch relisting, short of the API server's resourceVersion or its "
                "BOOKMARK; serve just resumed from a pause): decided again once caught up.",
                registry=registry,
            ),
            task_restarts=Counter(
                "remediator_task_restarts_total",
                "Runtime tasks restarted after they failed, by task.",
                ["task"],
                registry=registry,
            ),
            outbox_pruned=acting.outbox_pruned,
        )


class Counted(Protocol):
    def counts(self) -> dict[str, int]: ...


class OutboxCollector(Collector):
    """Outbox rows by state, read at scrape time: from the counts the SQLite outbox's
    triggers keep (five rows, whatever the table holds), or a Kafka worker's acting rows."""

    def __init__(self, outbox: Outbox | Counted) -> None:
        self._outbox = outbox

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "remediator_outbox_rows", "Outbox rows by state.", labels=["state"]
        )
        counts = self._outbox.counts()
        for state in STATES:
            family.add_metric([state], counts.get(state, 0))
        yield family
