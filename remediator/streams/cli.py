"""`remediator worker` and `remediator ingest`: the Kafka runtime's two commands."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import click

from remediator.runtime import options
from remediator.runtime.logs import log_level_option
from remediator.streams.config import StreamsConfig, Topic


def _topic(name: str, partitions: int) -> Topic:
    return Topic(name, partitions)


def kafka_options(fn: Any) -> Any:
    """Broker, group and topics: the same flags (and env) for the worker and the ingest."""
    flags = [
        click.option("--broker", envvar="REMEDIATOR_KAFKA_BROKER", default="kafka://127.0.0.1:9092",
                     show_default=True, help="Kafka bootstrap URL(s), comma-separated."),
        click.option("--group", envvar="REMEDIATOR_KAFKA_GROUP", default="remediator",
                     show_default=True, help="Consumer group (Faust app id)."),
        click.option("--inputs-topic", envvar="REMEDIATOR_INPUTS_TOPIC",
                     default="remediator-inputs", show_default=True),
        click.option("--inputs-partitions", envvar="REMEDIATOR_INPUTS_PARTITIONS", default=8,
                     show_default=True, type=click.IntRange(1, 10_000),
                     help="The unit of scale-out: at most this many workers share the work."),
        click.option("--candidates-topic", envvar="REMEDIATOR_CANDIDATES_TOPIC",
                     default="remediator-candidates", show_default=True),
        click.option("--guard-partitions", envvar="REMEDIATOR_GUARD_PARTITIONS", default=1,
                     show_default=True, type=click.IntRange(1, 1_000),
                     help="Partitions of the candidates topic. 1: one guard for the cluster. "
                     "More: the guard split by workload, its workload tier over them and "
                     "the cluster-wide caps over the admitted topic (docs/kafka.md, \"The "
                     "guard split by workload\"); the same verdicts, one more hop."),
        click.option("--admitted-topic", envvar="REMEDIATOR_ADMITTED_TOPIC",
                     default="remediator-admitted", show_default=True,
                     help="The guard's second tier's topic (one partition), with "
                     "--guard-partitions above 1."),
        click.option("--commands-topic", envvar="REMEDIATOR_COMMANDS_TOPIC",
                     default="remediator-commands", show_default=True),
        click.option("--commands-partitions", envvar="REMEDIATOR_COMMANDS_PARTITIONS", default=4,
                     show_default=True, type=click.IntRange(1, 10_000)),
        click.option("--replication", envvar="REMEDIATOR_KAFKA_REPLICATION", default=1,
                     show_default=True, type=click.IntRange(1, 10)),
    ]  # fmt: skip
    for option in reversed(flags):
        fn = option(fn)
    return fn


def _config(kw: dict[str, Any], **more: Any) -> StreamsConfig:
    return StreamsConfig(
        broker=kw["broker"],
        group=kw["group"],
        inputs=_topic(kw["inputs_topic"], kw["inputs_partitions"]),
        candidates=_topic(kw["candidates_topic"], kw["guard_partitions"]),
        admitted=_topic(kw["admitted_topic"], 1),
        commands=_topic(kw["commands_topic"], kw["commands_partitions"]),
        replication=kw["replication"],
        **more,
    )


@click.command()
@kafka_options
@click.option("--policy", envvar="REMEDIATOR_POLICY", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--store",
    envvar="REMEDIATOR_TABLE_STORE",
    default="memory://",
    show_default=True,
    help="Faust table store: memory:// (rebuilt from the changelog on start) or rocksdb://.",
)
@click.option(
    "--table-dir",
    envvar="REMEDIATOR_TABLE_DIR",
    default="/tmp/remediator-worker",
    show_default=True,
)
@click.option(
    "--listen",
    envvar="REMEDIATOR_WORKER_LISTEN",
    default="127.0.0.1:6066",
    show_default=True,
    help="/metrics, /healthz, /readyz; one port per worker.",
)
@click.option(
    "--tick",
    "tick_s",
    envvar="REMEDIATOR_TICK_S",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds between clock ticks (0: input times only).",
)
@click.option(
    "--session-timeout",
    "session_timeout_s",
    envvar="REMEDIATOR_KAFKA_SESSION_TIMEOUT_S",
    default=10.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds after which a worker that stopped heartbeating (SIGKILL, node loss) is "
    "dropped and its partitions move to the others; at least the broker's "
    "group.min.session.timeout.ms (6 s by default).",
)
@click.option(
    "--recovery-stall",
    "recovery_stall_s",
    envvar="REMEDIATOR_KAFKA_RECOVERY_STALL_S",
    default=120.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds a table restore (a start, a takeover) may read none of the changelog "
    "records it still needs before /healthz fails, so a liveness probe restarts the worker "
    "and a fresh consumer restores its partitions (Faust's restore can wait for good; "
    "docs/kafka.md). A slow restore that reads on never fails it. 0: never.",
)
@click.option(
    "--batch",
    envvar="REMEDIATOR_BATCH",
    default=500,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Records an agent takes at once, at most (it takes what is waiting): one table row and"
    " one record to the guard per batch.",
)
@options.kill_switch_file(
    "File the worker that holds the guard reads before it judges, at most every second: 'on'"
    " holds every decision (guardrail kill_switch), 'off' or missing lets them through;"
    " anything else counts as on (fail closed), as serve's.  [env REMEDIATOR_KILL_SWITCH_FILE]",
)
@click.option(
    "--ingest-watches",
    envvar="REMEDIATOR_KAFKA_INGEST_WATCHES",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Whether `remediator ingest` runs the kube watch (--namespaces). Its word, every"
    " second, says whether the watch's picture may lag the API server's; pod deletions are"
    " held while it says so, or says nothing for --watch-silent (an ingest dead or paused"
    " brings no pod's Ready either). on: required from the start; auto: once heard (an"
    " ingest of webhooks alone says nothing: nothing held); off: ignored.",
)
@click.option(
    "--watch-silent",
    "watch_silent_s",
    envvar="REMEDIATOR_KAFKA_WATCH_SILENT_S",
    default=10.0,
    show_default=True,
    type=click.FloatRange(2, 3600),
    help="Seconds of cluster time without the ingest's word on its watch after which pod"
    " deletions are held (see --ingest-watches).",
)
@click.option(
    "--batch-linger",
    "batch_linger_s",
    envvar="REMEDIATOR_KAFKA_BATCH_LINGER_S",
    default=0.005,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Seconds the partitions and guard agents wait for more records once a batch's"
    " first came alone. Every batch costs a table row per partition and a record to the"
    " guard, and every guard batch feedback to each partition it tells: records coming"
    " one by one (a cluster's pace, not a backlog) otherwise make a batch each. Adds up to"
    " twice this to an input's way to its command; 0: a lone record goes on at once.",
)
@click.option(
    "--fold-after",
    envvar="REMEDIATOR_KAFKA_FOLD_AFTER",
    default=2000,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Records a partition writes to the pods table between folds. A fold keeps, of what"
    " came before the partition's oldest live pod's first record, only what can still judge a"
    " pod: the last adaptive.window cold starts of each model's phase, the last deletion of"
    " each workload's phase, each workload's last document. It reads the partition's rows"
    " once: lower keeps the table smaller, higher reads it less often.",
)
@click.option(
    "--standby-replicas",
    envvar="REMEDIATOR_KAFKA_STANDBY_REPLICAS",
    default=0,
    show_default=True,
    type=click.IntRange(0, 10),
    help="Workers that keep a warm copy of each partition's tables besides its owner (they"
    " read its changelog as it is written): a takeover needs no restore, but each worker"
    " then also reads the others' changelogs, about as much work as its own. 0: the new"
    " owner restores the tables from the changelogs when it takes a partition over.",
)
@click.option(
    "--fetch-wait",
    "fetch_wait_s",
    envvar="REMEDIATOR_KAFKA_FETCH_WAIT_S",
    default=0.05,
    show_default=True,
    type=click.FloatRange(0.001, 30),
    help="Seconds the worker's consumer waits at the broker for records per fetch (Faust's"
    " own is 1.5 s). A partition left out of the fetch in flight (its records still"
    " buffered when it left) waits up to this long for its next records: every hop of the"
    " pipeline may pay it. Shorter: less latency, a few more fetches a second when idle.",
)
@options.argo_server("Argo Server URL; without it: dry run.")
@options.argo_namespace()
@options.slack_channel(
    "Channel the executor tells what it did (bot token: SLACK_BOT_TOKEN or "
    "SLACK_BOT_TOKEN_FILE). Unset: no Slack.  [env SLACK_CHANNEL]",
)
@options.slack_api_url
@click.option(
    "--dry-run-log",
    envvar="REMEDIATOR_DRY_RUN_LOG",
    help="Without --argo-server: append what would run here (JSON lines), each workflow once;"
    " without --slack-channel also each notice a note-only decision would send.",
)
@options.outbox_retention(
    "Days a closed row of the acting table (ended, expired, failed and told) is kept "
    "before it is deleted (a tombstone), as serve's outbox.",
)
@options.workflow_start_timeout(
    "Seconds a submitted workflow may stay Pending before on-call is told, once, in the "
    "act's thread; it is still followed to its end (as serve).",
)
@click.option(
    "--look-again",
    envvar="REMEDIATOR_LOOK_AGAIN",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Read a pod again from the API server just before it is deleted, as serve does (a "
    "pod Ready again is spared). on: the kube API must be reachable (in a pod: its "
    "ServiceAccount, else --kubeconfig); auto: on where a kube config is found, else off "
    "(logged); off: never. Only with --argo-server; needs `get pods` where it acts.",
)
@options.kubeconfig(
    "Kubeconfig file for --look-again. Default: in-cluster when in a pod, else "
    "~/.kube/config.  [env KUBECONFIG]",
)
@log_level_option
def worker(**kw: Any) -> None:
    """Run the core as a Faust worker on Kafka; start as many as the inputs topic has
    partitions. Topics are created (or checked) with their partition counts first."""
    import logging

    import faust
    from prometheus_client import CollectorRegistry

    from remediator.executors.argo import ArgoConfig, ArgoExecutor
    from remediator.executors.protocol import Executor
    from remediator.policy_file import PolicyFile, load_policy_file
    from remediator.runtime.logs import setup_logging
    from remediator.runtime.worker import WorkerSettings
    from remediator.sources.http import Listen
    from remediator.streams.app import build_app
    from remediator.streams.executor import DryRunRecorder, Executors
    from remediator.streams.topics import ensure_topics

    setup_logging(kw["log_level"])
    # A takeover's table recovery, step by step (restoring, seeking, resuming the flow): a
    # few lines per rebalance, and what tells a recovery that waits for good from one that
    # runs long.
    logging.getLogger("faust.tables.recovery").setLevel(kw["log_level"].upper())
    listen = Listen.parse(kw["listen"])
    cfg = _config(kw, store=kw["store"], table_dir=kw["table_dir"], web_host=listen.host,
                  web_port=listen.port, tick_s=kw["tick_s"],
                  session_timeout_s=kw["session_timeout_s"], batch=kw["batch"],
                  recovery_stall_s=kw["recovery_stall_s"],
                  standby_replicas=kw["standby_replicas"], fold_after=kw["fold_after"],
                  fetch_wait_s=kw["fetch_wait_s"],
                  batch_linger_s=kw["batch_linger_s"],
                  ingest_watches={"on": True, "auto": None, "off": False}[kw["ingest_watches"]],
                  watch_silent_s=kw["watch_silent_s"],
                  kill_switch_file=kw["kill_switch_file"])  # fmt: skip
    policy = load_policy_file(kw["policy"]) if kw["policy"] else PolicyFile()
    cluster: Executor
    notifier: Executor | None = None
    if kw["argo_server"]:
        from remediator.executors.secrets import MissingSecret

        try:
            cluster = ArgoExecutor(ArgoConfig(host=kw["argo_server"],
                                              namespace=kw["argo_namespace"]))  # fmt: skip
        except MissingSecret as exc:
            raise click.ClickException(str(exc)) from None
    else:  # a dry run: what would run is recorded, and so is a notice with no Slack to tell
        cluster = notifier = DryRunRecorder(kw["dry_run_log"])
    if kw["slack_channel"]:
        from remediator.executors.secrets import MissingSecret
        from remediator.executors.slack import SlackConfig, SlackNotifier

        config = SlackConfig(channel=kw["slack_channel"], base_url=kw["slack_api_url"])
        try:
            notifier = SlackNotifier(config)
        except MissingSecret as exc:
            raise click.ClickException(str(exc)) from None
    look = _look(kw, policy) if kw["argo_server"] else None  # a bad config fails at start
    asyncio.run(ensure_topics(cfg))
    settings = WorkerSettings(retention_s=kw["outbox_retention"] * 86400.0,
                              start_within_s=kw["workflow_start_timeout"])  # fmt: skip
    executors = Executors(cluster, notifier, settings, look=look)
    app = build_app(cfg, policy, executors, CollectorRegistry())
    faust.Worker(app, loglevel=kw["log_level"].lower(), override_logging=False,
                 quiet=True).execute_from_commandline()  # fmt: skip


def _look(kw: dict[str, Any], policy: Any) -> Any:
    """serve's look again before a delete (`sources.pod_look.PodLook`), or None."""
    import logging

    from remediator.sources.kube_client import api_client
    from remediator.sources.pod_look import PodLook

    if kw["look_again"] == "off":
        return None
    try:
        api = api_client(kw["kubeconfig"])
    except Exception as exc:  # noqa: BLE001 — the kube client raises what its loaders raise
        if kw["look_again"] == "on":
            raise click.ClickException(f"--look-again on: no kube API: {exc}") from None
        logging.getLogger("remediator.worker").warning(
            "pods are not looked at again before a delete: no kube config",
            extra={"error": str(exc)},
        )
        return None
    return PodLook(api, policy.rules.stuck_pod.engine_containers)


@click.command()
@kafka_options
@click.option("--listen", envvar="REMEDIATOR_LISTEN", default="127.0.0.1:8080", show_default=True)
@click.option(
    "--token-file",
    envvar="REMEDIATOR_WEBHOOK_TOKEN_FILE",
    help="Bearer token for POST /events (else $REMEDIATOR_WEBHOOK_TOKEN).",
)
@options.namespaces(
    "Comma-separated inference namespaces to list+watch (Pods, Events, Deployments,"
    " StatefulSets), as serve does, onto the inputs topic; with them the ingest says every"
    " second whether its watch is current (workers: --ingest-watches). Empty: no watch,"
    " webhooks only.  [env REMEDIATOR_INFERENCE_NAMESPACES]",
)
@options.warmup_daemonset
@options.kubeconfig(
    "Kubeconfig file for the watch. Default: in-cluster when in a pod, else ~/.kube/config."
    "  [env KUBECONFIG]",
)
@log_level_option
def ingest(**kw: Any) -> None:
    """Take webhooks (POST /events, as `remediator serve` does) and, with --namespaces, the
    kube watch, and publish them to the inputs topic; a webhook is answered 202 only once
    the broker acknowledged every record.

    \b
    Exit codes: 0 stopped by SIGTERM or SIGINT; 1 a task (a watch, the probe, the
    publishing) kept failing, or the token or kube config is missing."""
    from prometheus_client import CollectorRegistry

    from remediator.runtime.clock import SystemClock
    from remediator.runtime.logs import setup_logging
    from remediator.sources.http import Listen, serve_app
    from remediator.sources.kube_watch import targets
    from remediator.sources.metrics import SourceMetrics
    from remediator.streams.ingest import Publisher, make_ingest_app
    from remediator.streams.ingest_watch import IngestWatch
    from remediator.streams.topics import ensure_topics

    setup_logging(kw["log_level"])
    cfg = _config(kw)

    def token() -> str:
        path = kw["token_file"]
        if path:
            with open(path) as f:
                value = f.read().strip()
        else:
            value = os.environ.get("REMEDIATOR_WEBHOOK_TOKEN", "")
        if not value:
            raise click.ClickException("no webhook token: --token-file or REMEDIATOR_WEBHOOK_TOKEN")
        return value

    token()  # fail at start, not on the first request

    api = _kube_api(kw["kubeconfig"]) if kw["namespaces"] else None

    async def main() -> str | None:
        await ensure_topics(cfg)
        registry = CollectorRegistry()
        metrics = SourceMetrics.on(registry)
        publisher = Publisher(cfg, registry)
        await publisher.start()
        watch: IngestWatch | None = None
        if api is not None:
            found = targets(list(kw["namespaces"]), kw["warmup_daemonset"])
            watch = IngestWatch(publisher, api, found, metrics, registry)
        app = make_ingest_app(publisher, registry, token, metrics,
                              watch.ready if watch else None)  # fmt: skip
        runner, port = await serve_app(app, Listen.parse(kw["listen"]))
        click.echo(f"ingest listening on {port}", err=True)
        stop = watch.stopping if watch else asyncio.Event()
        if watch is not None:
            watch.start(SystemClock())
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        if watch is not None:
            await watch.stop()
        await runner.cleanup()
        await publisher.stop()
        return watch.supervisor.failure if watch and watch.supervisor else None

    failure = asyncio.run(main())
    if failure:
        raise click.ClickException(failure)


def _kube_api(kubeconfig: str | None) -> Any:
    from remediator.sources.kube_client import api_client

    try:
        return api_client(kubeconfig)
    except Exception as exc:  # noqa: BLE001 — the kube client raises what its loaders raise
        raise click.ClickException(f"--namespaces: no kube API: {exc}") from None
