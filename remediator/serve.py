"""`remediator serve`: the long-running service (one process, asyncio + SQLite)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket

import click

from remediator.contract.errors import ConfigError
from remediator.executors.argo_params import remediator_image
from remediator.executors.secrets import MissingSecret
from remediator.executors.validate import InvalidParameter
from remediator.logfields import get_logger
from remediator.runtime import options
from remediator.runtime.embedded import RuntimeSettings
from remediator.runtime.inbox import KEEP_BYTES
from remediator.runtime.leader import LeaseSettings
from remediator.runtime.logs import log_level_option, setup_logging
from remediator.runtime.service import Service, ServiceConfig
from remediator.runtime.statefile import EXIT_CODE as STATE_FILE_EXIT
from remediator.runtime.statefile import StateFileError
from remediator.sources.http import MAX_BODY
from remediator.timeline.tracker import DEFAULT_MAX_UNWATCHED

log = get_logger("remediator.serve")

_EPILOG = """\b
Secrets (environment only, never flags, never logged):
  REMEDIATOR_WEBHOOK_TOKEN / _FILE  bearer token POST /events and /v1/traces require; the
                                    file is re-read on each request (rotate it in place or
                                    by rename); missing or empty: 503 and /readyz fails
  ARGO_TOKEN / ARGO_TOKEN_FILE      Argo Server token (required unless --dry-run)
  SLACK_BOT_TOKEN / _FILE           xoxb-... bot token (required with --slack-channel)

\b
Leader election (on when POD_NAME is set, i.e. in a cluster):
  POD_NAME         this replica's identity in the Lease (else the hostname)
  POD_NAMESPACE    the Lease's namespace (or --lease-namespace)
  REMEDIATOR_IMAGE image workflow steps run (WorkflowTemplate remediator-image)

\b
Endpoints on --listen:
  POST /events   Alertmanager webhook, CloudEvent (structured or binary), watch event
  POST /v1/traces  OTLP/HTTP traces (application/x-protobuf or application/json, gzip):
                 vLLM's start-up spans, attributed to pods by k8s.namespace.name,
                 k8s.pod.name (k8s.pod.uid) resource attributes; 200 with OTLP's
                 partial_success for spans without a pod, 400 undecodable, 415 other types
  GET  /healthz  liveness
  GET  /readyz   readiness: policy loaded; every watch synced, running and current (a
                 BOOKMARK or event within 90 s); webhooks can be stored; a token to check
  GET  /metrics  Prometheus
  GET  /timelines[?namespace=&state=]  every pod's cold start (JSON lines, as replay prints)
  GET  /timelines/NAMESPACE/POD        one pod's timelines (404 if untracked)

\b
Exit codes:
  0  stopped by SIGTERM, SIGINT or SIGHUP (gracefully)
  1  a loop task kept failing, or the configuration or a secret is wrong
  2  a usage error (options)
  3  the state file (--state-db) cannot be used: not SQLite, corrupt, another
     program's tables, a directory; it is left as it is, the message says why

\b
Example (a laptop against a kind cluster, dry run):
  export REMEDIATOR_WEBHOOK_TOKEN=$(openssl rand -hex 16) SLACK_BOT_TOKEN=xoxb-...
  remediator serve --policy examples/policy.yaml --namespaces llm \\
      --listen 127.0.0.1:8080 --state-db ./state.db --slack-channel C0123456789 \\
      --dry-run
"""


@click.command("serve", epilog=_EPILOG)
@click.option(
    "--policy",
    envvar="REMEDIATOR_POLICY",
    type=click.Path(exists=True, dir_okay=False),
    help="Policy YAML (rules and guardrails). Default: the built-in defaults.  "
    "[env REMEDIATOR_POLICY]",
)
@click.option(
    "--listen",
    envvar="REMEDIATOR_LISTEN",
    default="0.0.0.0:8080",
    show_default=True,
    help="HOST:PORT for webhooks, probes and metrics.  [env REMEDIATOR_LISTEN]",
)
@click.option(
    "--state-db",
    envvar="REMEDIATOR_STATE_DB",
    default="/tmp/remediator/state.db",
    show_default=True,
    help="SQLite file: the outbox, the guard state and the webhooks stored before their "
    "2xx. Keep it on a volume that outlives the process. Deleted while running: recreated "
    "from the open copy; unusable at start: exit code 3.  [env REMEDIATOR_STATE_DB]",
)
@options.namespaces(
    "Comma-separated inference namespaces to list+watch "
    "(Pods, Events, Deployments, StatefulSets). Empty: no watch, webhooks only.  "
    "[env REMEDIATOR_INFERENCE_NAMESPACES]",
)
@options.warmup_daemonset
@options.kubeconfig(
    "Kubeconfig file. Default: in-cluster when in a pod, else ~/.kube/config.  [env KUBECONFIG]",
)
@options.argo_server(
    "Argo Server URL, e.g. https://argo-server.argo:2746. Required unless "
    "--dry-run.  [env ARGO_SERVER]",
)
@options.argo_namespace(
    "Where the WorkflowTemplates live and workflows run.  [env ARGO_NAMESPACE]",
)
@click.option(
    "--argo-ui-url",
    envvar="ARGO_UI_URL",
    default=None,
    help="Base URL for workflow links in Slack. Default: --argo-server.  [env ARGO_UI_URL]",
)
@click.option(
    "--argo-ca-cert",
    envvar="ARGO_CA_CERT",
    default=None,
    help="CA bundle for the Argo Server's TLS.  [env ARGO_CA_CERT]",
)
@options.slack_channel(
    "Channel id (C0123456789) the bot posts to. A #name posts too, but after a crash "
    "only the id lets it find what it already posted (channels:history) instead of posting "
    "again. Unset: no Slack.  [env SLACK_CHANNEL]",
)
@options.slack_api_url
@click.option(
    "--dry-run/--no-dry-run",
    envvar="REMEDIATOR_DRY_RUN",
    default=False,
    show_default=True,
    help="Decide everything, do nothing; Slack hears what would "
    "have been done. Adds to the policy's guardrails.dry_run, never removes it.  "
    "[env REMEDIATOR_DRY_RUN]",
)
@options.kill_switch_file(
    "File polled every 5 s: 'on' stops every action, 'off' or missing resumes. "
    "Anything else counts as on (fail closed): another word, text that is not UTF-8 (or "
    "UTF-16/32 with a BOM), a file that cannot be read; logged once, shown in /readyz and "
    "remediator_kill_switch_unclear.  [env REMEDIATOR_KILL_SWITCH_FILE]",
)
@click.option(
    "--no-leader-election",
    is_flag=True,
    envvar="REMEDIATOR_NO_LEADER_ELECTION",
    help="This replica always acts: run ONE replica. Default outside a cluster "
    "(POD_NAME unset).  [env REMEDIATOR_NO_LEADER_ELECTION]",
)
@click.option(
    "--leader-election",
    is_flag=True,
    envvar="REMEDIATOR_LEADER_ELECTION",
    help="Elect a leader through the Lease even without POD_NAME (identity: the "
    "hostname). Default in a cluster.  [env REMEDIATOR_LEADER_ELECTION]",
)
@click.option(
    "--lease-name",
    envvar="REMEDIATOR_LEASE_NAME",
    default="remediator-leader",
    show_default=True,
    help="The pre-created coordination.k8s.io Lease (get/update only, never created).  "
    "[env REMEDIATOR_LEASE_NAME]",
)
@click.option(
    "--lease-namespace",
    envvar="POD_NAMESPACE",
    default=None,
    help="The Lease's namespace. Default: this pod's.  [env POD_NAMESPACE]",
)
@click.option(
    "--lease-duration",
    envvar="REMEDIATOR_LEASE_DURATION",
    type=click.FloatRange(min=1),
    default=15.0,
    show_default=True,
    help="Seconds a leader's claim lasts without renewal.  [env REMEDIATOR_LEASE_DURATION]",
)
@options.above_zero(
    "--renew-deadline",
    "REMEDIATOR_RENEW_DEADLINE",
    10.0,
    "A leader that could not renew for this long stops acting.  [env REMEDIATOR_RENEW_DEADLINE]",
)
@options.above_zero(
    "--retry-period",
    "REMEDIATOR_RETRY_PERIOD",
    2.0,
    "Seconds between Lease attempts.  [env REMEDIATOR_RETRY_PERIOD]",
)
@click.option(
    "--state-configmap",
    envvar="REMEDIATOR_STATE_CONFIGMAP",
    default="remediator-state",
    show_default=True,
    help="With leader election: the pre-created ConfigMap, in the Lease's namespace, the "
    "leader writes the learned history and the guard state to (get/patch only), and a "
    "replica whose state file has none takes them from on start: an upgrade that replaces "
    "every replica starts neither blind nor with its caps reset.  "
    "[env REMEDIATOR_STATE_CONFIGMAP]",
)
@click.option(
    "--no-shared-state",
    is_flag=True,
    envvar="REMEDIATOR_NO_SHARED_STATE",
    help="Share nothing through --state-configmap: each replica keeps only its own state "
    "file.  [env REMEDIATOR_NO_SHARED_STATE]",
)
@options.above_zero(
    "--state-share-interval",
    "REMEDIATOR_STATE_SHARE_INTERVAL",
    60.0,
    "Seconds between the leader's writes of the shared state (only when it changed; "
    "once more when it stops).  [env REMEDIATOR_STATE_SHARE_INTERVAL]",
)
@click.option(
    "--max-webhook-pods",
    envvar="REMEDIATOR_MAX_WEBHOOK_PODS",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_UNWATCHED,
    show_default=True,
    help="Pods known from webhooks alone (never seen by the watch) kept at most; the oldest "
    "are forgotten first (remediator_unwatched_pods_dropped_total).  "
    "[env REMEDIATOR_MAX_WEBHOOK_PODS]",
)
@options.above_zero(
    "--idle-timeout",
    "REMEDIATOR_IDLE_TIMEOUT",
    75.0,
    "Seconds an HTTP connection may go without a complete request before it is "
    "closed.  [env REMEDIATOR_IDLE_TIMEOUT]",
)
@options.outbox_retention(
    "Days a closed outbox row (ended, expired, failed and told) is kept before it is "
    "deleted.  [env REMEDIATOR_OUTBOX_RETENTION]",
)
@options.workflow_start_timeout(
    "Seconds a submitted workflow may stay Pending (Argo took it, nothing started it: "
    "no workflow-controller, a quota) before on-call is told, once, in the act's thread; "
    "it is still followed to its end.  [env REMEDIATOR_WORKFLOW_START_TIMEOUT]",
)
@click.option(
    "--inbox-max-bytes",
    envvar="REMEDIATOR_INBOX_MAX_BYTES",
    type=click.IntRange(min=MAX_BODY),
    default=KEEP_BYTES,
    show_default=True,
    help="Bytes of webhook bodies the state file keeps (to feed again after a restart), "
    "sized against deploy/base's 64 MiB emptyDir; when full, the oldest bodies older "
    "than a minute make room, else the webhook gets 503 and the sender retries.  "
    "[env REMEDIATOR_INBOX_MAX_BYTES]",
)
@options.above_zero(
    "--behind-unready",
    "REMEDIATOR_BEHIND_UNREADY",
    30.0,
    "Seconds pod deletions may be held because the picture may lag the cluster's (a "
    "Pod watch relisting after a reconnect, short of the API server's resourceVersion or "
    "of its BOOKMARK; serve just resumed from a pause) before /readyz fails. Held "
    "deletions are decided again once caught up.  [env REMEDIATOR_BEHIND_UNREADY]",
)
@log_level_option
def serve(
    policy: str | None,
    listen: str,
    state_db: str,
    namespaces: tuple[str, ...],
    warmup_daemonset: str,
    kubeconfig: str | None,
    argo_server: str | None,
    argo_namespace: str,
    argo_ui_url: str | None,
    argo_ca_cert: str | None,
    slack_channel: str | None,
    slack_api_url: str,
    dry_run: bool,
    kill_switch_file: str | None,
    no_leader_election: bool,
    leader_election: bool,
    lease_name: str,
    lease_namespace: str | None,
    lease_duration: float,
    renew_deadline: float,
    retry_period: float,
    state_configmap: str,
    no_shared_state: bool,
    state_share_interval: float,
    max_webhook_pods: int,
    idle_timeout: float,
    outbox_retention: float,
    workflow_start_timeout: float,
    inbox_max_bytes: int,
    behind_unready: float,
    log_level: str,
) -> None:
    """Run remediator as a service: watch inference pods, take webhooks, track every
    cold start, and act on stuck pods and image updates through Argo Workflows,
    telling on-call in Slack.

    Every decision let through the guardrails is written to the outbox (--state-db)
    before it is submitted; after a crash the outbox is resumed, and a workflow that
    was already submitted is recognised (409) rather than run twice. SIGTERM, SIGINT
    and SIGHUP stop it gracefully (there is no reload: a restart re-reads everything).
    """
    setup_logging(log_level)
    try:
        remediator_image()  # a bad REMEDIATOR_IMAGE stops the start, not the first workflow
        lease = _lease(
            no_leader_election,
            leader_election,
            lease_name,
            lease_namespace,
            (lease_duration, renew_deadline, retry_period),
        )
    except (InvalidParameter, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    cfg = ServiceConfig(
        policy=policy,
        listen=listen,
        state_db=state_db,
        namespaces=namespaces,
        warmup_daemonset=warmup_daemonset or None,
        kubeconfig=kubeconfig,
        argo_server=argo_server,
        argo_namespace=argo_namespace,
        argo_ui_url=argo_ui_url,
        argo_ca_cert=argo_ca_cert,
        slack_channel=slack_channel,
        slack_api_url=slack_api_url,
        dry_run=dry_run,
        runtime=RuntimeSettings(
            kill_switch_file=kill_switch_file,
            outbox_retention_s=outbox_retention * 86400,
            workflow_start_timeout_s=workflow_start_timeout,
            behind_unready_s=behind_unready,
        ),
        lease=lease,
        state_configmap=None if no_shared_state else state_configmap or None,
        state_share_s=state_share_interval,
        max_webhook_pods=max_webhook_pods,
        http_idle_timeout_s=idle_timeout,
        inbox_keep_bytes=inbox_max_bytes,
    )
    try:
        asyncio.run(_main(cfg))
    except StateFileError as exc:
        log.critical("state file cannot be used", extra={"path": state_db, "error": str(exc)})
        raise _StateFileUnusable(str(exc)) from None
    except (ConfigError, MissingSecret, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


class _StateFileUnusable(click.ClickException):
    exit_code = STATE_FILE_EXIT


def _lease(
    off: bool,
    on: bool,
    name: str,
    namespace: str | None,
    timing: tuple[float, float, float],
) -> LeaseSettings | None:
    """On in a cluster (POD_NAME set) or with --leader-election; off with
    --no-leader-election or outside a cluster, where one process is the norm."""
    pod = os.environ.get("POD_NAME", "").strip()
    if on and off:
        raise ValueError("--leader-election and --no-leader-election contradict each other")
    if off or not (on or pod):
        log.info("leader election off: this replica always acts", extra={"pod": pod or None})
        return None
    if not namespace:
        raise ValueError(
            "leader election needs the Lease's namespace: POD_NAMESPACE or --lease-namespace"
        )
    duration, deadline, retry = timing
    return LeaseSettings(
        name=name,
        namespace=namespace,
        identity=pod or socket.gethostname(),
        lease_duration_s=duration,
        renew_deadline_s=deadline,
        retry_period_s=retry,
    )


async def _main(cfg: ServiceConfig) -> None:
    service = Service(cfg)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    # SIGHUP too: a closed terminal or a stray `kill -HUP` (the usual "reload") is a graceful
    # stop, never instant death; the orchestrator starts it again, which re-reads everything.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stopping.set)
    await service.start()
    waiter = asyncio.create_task(stopping.wait())
    runner = asyncio.create_task(service.wait())
    await asyncio.wait({waiter, runner}, return_when=asyncio.FIRST_COMPLETED)
    log.info("stopping", extra={"signal": stopping.is_set()})
    await service.stop()
    if service.runtime.failure is not None:  # a task kept failing: let the orchestrator restart us
        raise click.ClickException(f"stopped: {service.runtime.failure}")


if __name__ == "__main__":
    serve()
