"""What every worker exports on /metrics besides the core's own (the cold-start
histograms of its partitions, the guard's decisions and suppressions)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.inputs = Counter(
            "remediator_kafka_records_total",
            "Input-topic documents processed (each of an envelope's).",
            registry=registry,
        )
        self.input_errors = Counter(
            "remediator_kafka_input_errors_total",
            "Input-topic records that did not decode (skipped, logged).",
            registry=registry,
        )
        self.rebuilds = Counter(
            "remediator_kafka_partition_rebuilds_total",
            "Input partitions rebuilt from their table (start, takeover).",
            registry=registry,
        )
        self.pruned = Counter(
            "remediator_kafka_pruned_pods_total",
            "Deleted pods whose records left the pods table (their grace passed).",
            registry=registry,
        )
        self.folds = Counter(
            "remediator_kafka_learned_folds_total",
            "Folds of a partition's learned history in the pods table: cold starts no pod"
            " alive can be judged by any more left it (streams.pods.PartitionRows.fold).",
            registry=registry,
        )
        self.rewinds = Counter(
            "remediator_kafka_rewinds_total",
            "Partitions sought back to the first record their agent never got: records"
            " Faust fetched and dropped (around a rebalance), fetched again; and a restored"
            " guard's candidates, read again from the oldest still waiting.",
            registry=registry,
        )
        self.feedback = Counter(
            "remediator_kafka_feedback_total",
            "The guard's feedback records (what got through, a not-yet, cold starts"
            " learned elsewhere), one per partition and guard batch, by how they went:"
            " process (a partition this worker holds, applied at once) or topic (sent to"
            " the inputs topic for the worker that holds it).",
            ["via"],
            registry=registry,
        )
        for via in ("process", "topic"):
            self.feedback.labels(via)  # both shown from the start, at 0
        self.tier_words = Counter(
            "remediator_kafka_tier_words_total",
            "Records between the guard's tiers (--guard-partitions > 1): a first tier's"
            " admitted candidates and watermark to the second, its word back. All go to"
            " their topic; by how the other tier took them: process (it is here, taken at"
            " once) or topic (read from the topic, by this worker or another).",
            ["via"],
            registry=registry,
        )
        for via in ("process", "topic"):
            self.tier_words.labels(via)
        self.candidates = Counter(
            "remediator_kafka_candidates_total",
            "Decisions sent to the guard (before the guardrails).",
            registry=registry,
        )
        self.commands = Counter(
            "remediator_kafka_commands_total",
            "Commands taken by the executor agent, by action and status (new: its row made;"
            " redelivered: its row was there already; told: a dry run's note; bad: undecodable).",
            ["action", "status"],
            registry=registry,
        )
        self._stage = Histogram(
            "remediator_kafka_stage_seconds",
            "Time in the core per batch of records, by agent.",
            ["agent"],
            buckets=_STAGE_BUCKETS,
            registry=registry,
        )
        self._latency = Histogram(
            "remediator_kafka_command_age_seconds",
            "From a command's record being written to its being carried.",
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )

    def stage(self, agent: str, seconds: float) -> None:
        self._stage.labels(agent).observe(seconds)

    def latency(self, seconds: float) -> None:
        self._latency.observe(max(0.0, seconds))
