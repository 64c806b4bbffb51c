"""What a Kafka deployment of remediator is configured by: broker, topics, store, group."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    partitions: int


@dataclass(frozen=True, slots=True)
class StreamsConfig:
    broker: str = "kafka://127.0.0.1:9092"  # comma-separated for several brokers
    group: str = "remediator"  # the consumer group, also Faust's app id (prefix of internal topics)
    inputs: Topic = Topic("remediator-inputs", 8)  # raw inputs, keyed by pod
    # One partition: one guard for the cluster. More: the guard split by workload, a first
    # tier per partition and the second over `admitted` (streams/tiers.py).
    candidates: Topic = Topic("remediator-candidates", 1)
    admitted: Topic = Topic("remediator-admitted", 1)  # the second tier's: exactly one
    commands: Topic = Topic("remediator-commands", 4)  # decisions let through, keyed by incident
    replication: int = 1
    store: str = "memory://"  # or rocksdb:// (needs rocksdict); the changelog is the truth
    table_dir: str = "/tmp/remediator-worker"
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    session_timeout_s: float = 10.0  # the broker's group.min.session.timeout.ms is 6 s
    tick_s: float = 1.0  # a worker moves its partitions' clocks on this often (0: inputs only)
    batch: int = 500  # records an agent takes at once, at most (what is waiting)
    # Once a batch's first record came and nothing else waits, the partitions and guard
    # agents wait this long for more (streams/batches.py): 0 takes a lone record at once.
    batch_linger_s: float = 0.005
    linger_s: float = 0.005  # the producer waits this long to fill a request
    # Acked offsets are committed this often (the producer flushed first): what a restarted
    # worker reads again, and what says a burst is done. An OffsetCommit per interval, only
    # when offsets moved (Kafka Streams commits every 100 ms under exactly-once too).
    commit_interval_s: float = 0.1
    # The longest a worker's consumer waits at the broker for records (Faust's own is
    # 1.5 s): a partition left out of the fetch in flight waits this long at most
    # (streams/transport.py).
    fetch_wait_s: float = 0.05
    # Workers that keep a warm copy of each table partition they do not own (reading its
    # changelog as it is written): a takeover needs no restore, but every worker then
    # reads every other's changelogs, so a second worker costs the pipeline nearly a
    # second worker's CPU. 0: the new owner restores from the changelog (pruned: the pods
    # alive), in seconds.
    standby_replicas: int = 0
    # A table recovery that reads none of its remaining changelog records for this long
    # is stalled: /healthz fails, so a liveness probe restarts the worker (0: never).
    recovery_stall_s: float = 120.0
    # The ingest's watch (streams/ingest_watch.py) says how it stands every second; pod
    # deletions are held while it says behind, or says nothing for `watch_silent_s`.
    # True: its word is required from the start; None: once heard; False: ignored.
    ingest_watches: bool | None = None
    watch_silent_s: float = 10.0
    # Records a partition writes to the pods table between folds (streams/pods.py,
    # `PartitionRows.fold`): a fold reads the partition's rows once.
    fold_after: int = 2000
    # serve's kill-switch file, read by the worker that holds the guard (streams/kill_switch.py).
    kill_switch_file: str | None = None

    def __post_init__(self) -> None:
        for topic in (self.inputs, self.candidates, self.commands, self.admitted):
            if topic.partitions < 1:
                raise ValueError(f"topic {topic.name}: partitions must be at least 1")
        if self.batch < 1:
            raise ValueError("batch must be at least 1")
        if not 0 <= self.batch_linger_s <= 1:
            raise ValueError("batch_linger_s must be between 0 and 1 second")
        if self.recovery_stall_s < 0:
            raise ValueError("recovery_stall_s must be at least 0")
        if not 0 < self.fetch_wait_s <= 30:
            raise ValueError("fetch_wait_s must be above 0 and at most 30 seconds")
        if not 2 <= self.watch_silent_s <= 3600:
            raise ValueError("watch_silent_s must be between 2 and 3600 seconds")
        if self.fold_after < 1:
            raise ValueError("fold_after must be at least 1")
        if self.standby_replicas < 0:
            raise ValueError("standby_replicas must be at least 0")
        if self.admitted.partitions != 1:
            raise ValueError(
                "the admitted topic must have exactly 1 partition: the cluster-wide"
                " guardrails (rate limit, blast radius) decide in one place"
            )

    @property
    def tiers(self) -> bool:
        """The guard split by workload: a first tier per candidates partition, one second."""
        return self.candidates.partitions > 1

    @property
    def bootstrap(self) -> str:
        """host:port[,host:port] for plain Kafka clients (aiokafka's admin, the ingest)."""
        return ",".join(u.split("://", 1)[-1] for u in self.broker.split(","))

    @property
    def topics(self) -> tuple[Topic, ...]:
        second = (self.admitted,) if self.tiers else ()
        return (self.inputs, self.candidates, self.commands, *second)

    @property
    def changelogs(self) -> tuple[Topic, ...]:
        """The tables' changelog topics, named as Faust names them, co-partitioned with
        the topic each table is written from."""
        second = (Topic(f"{self.group}-settle-changelog", 1),) if self.tiers else ()
        return (
            Topic(f"{self.group}-pods-changelog", self.inputs.partitions),
            Topic(f"{self.group}-guard-changelog", self.candidates.partitions),
            Topic(f"{self.group}-acting-changelog", self.commands.partitions),
            *second,
        )
