"""Counters the input sources keep: what came in, what was refused, how often a watch restarted."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge


@dataclass(frozen=True, slots=True)
class SourceMetrics:
    inputs: Counter
    input_errors: Counter
    watch_restarts: Counter
    watch_synced: Gauge
    watch_behind: Gauge
    alerts: Counter
    refused: Counter
    spans: Counter

    @classmethod
    def on(cls, registry: CollectorRegistry) -> SourceMetrics:
        return cls(
            inputs=Counter(
                "remediator_inputs_total",
                "Inputs decoded and queued for the core, by source.",
                ["source"],
                registry=registry,
            ),
            input_errors=Counter(
                "remediator_input_errors_total",
                "Inputs refused as malformed or unknown (logged, never guessed at), by source.",
                ["source"],
                registry=registry,
            ),
            watch_restarts=Counter(
                "remediator_watch_restarts_total",
                "Kubernetes watches restarted, by kind and reason (gone: relisted after 410; "
                "error: backed off; ended: the server closed the stream).",
                ["kind", "reason"],
                registry=registry,
            ),
            watch_synced=Gauge(
                "remediator_watch_synced",
                "1 once a watch has listed its objects and is streaming; 0 while relisting.",
                ["kind", "namespace"],
                registry=registry,
            ),
            watch_behind=Gauge(
                "remediator_watch_behind",
                "1 while a Pod watch may lag the API server: relisting, short of the "
                "resourceVersion a probe found it at, or past its BOOKMARK (pod deletions "
                "are held meanwhile).",
                ["kind", "namespace"],
                registry=registry,
            ),
            alerts=Counter(
                "remediator_alerts_received_total",
                "Alertmanager alerts received on /events, by alertname and status (firing, "
                "resolved); acted on or not.",
                ["alertname", "status"],
                registry=registry,
            ),
            refused=Counter(
                "remediator_webhooks_unavailable_total",
                "Webhooks answered 503 (the sender retries): the state file refused the write, "
                "the backlog was full, or the service was stopping.",
                registry=registry,
            ),
            spans=Counter(
                "remediator_otlp_spans_total",
                "Spans received on /v1/traces, by outcome: kept (a vLLM start-up step of a "
                "known pod), rejected (a start-up step without its pod or its times), ignored "
                "(any other span).",
                ["outcome"],
                registry=registry,
            ),
        )
