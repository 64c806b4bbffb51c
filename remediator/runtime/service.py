"""Assembly: configuration → session, outbox, executors, watches, HTTP, runtime.

`Service.start()` brings everything up (the HTTP port is bound before it returns),
`Service.stop()` takes it down in order: stop intake, stop the loop's tasks, close the
outbox. `serve` (the CLI) and the tests use exactly this.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes import client
from prometheus_client import CollectorRegistry

from remediator.core.decider import node_pace_gauges
from remediator.core.guard import HedgeBudgetGauges
from remediator.executors.argo import ArgoConfig, ArgoExecutor, Backoff
from remediator.executors.secrets import read_token
from remediator.executors.slack import SlackConfig, SlackNotifier
from remediator.guard.state import StateError
from remediator.inputs.records import Input
from remediator.logfields import get_logger
from remediator.metrics.export import TrackerCollector
from remediator.policy_file import PolicyFile, load_policy_file
from remediator.runtime.clock import Clock, SystemClock
from remediator.runtime.embedded import Runtime, RuntimeSettings
from remediator.runtime.inbox import KEEP_BYTES, Inbox
from remediator.runtime.leader import Always, Leadership, LeaseLeadership, LeaseSettings
from remediator.runtime.metrics import OutboxCollector, RuntimeMetrics
from remediator.runtime.observe import Observers
from remediator.runtime.outbox import Outbox
from remediator.runtime.shared_state import SharedState, StateConfigMap
from remediator.runtime.statefile import OPEN_ERRORS, unusable
from remediator.session import Session
from remediator.sources.engine_logs import EngineLogFollower, LogMetrics
from remediator.sources.first_token import FirstTokenProber, ProbeMetrics
from remediator.sources.http import IDLE_TIMEOUT_S, Listen, make_app, serve_app
from remediator.sources.kube_client import api_client
from remediator.sources.kube_watch import (
    KubeWatch,
    WatchSettings,
    pods_behind,
    probe_forever,
    targets,
)
from remediator.sources.metrics import SourceMetrics
from remediator.sources.pod_look import PodLook
from remediator.timeline.tracker import DEFAULT_MAX_UNWATCHED

log = get_logger("remediator.service")


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    policy: str | None = None
    listen: str = "0.0.0.0:8080"
    state_db: str = "/tmp/remediator/state.db"
    namespaces: tuple[str, ...] = ()
    warmup_daemonset: str | None = "kube-system/gpu-warmup"
    watch: bool = True  # False: webhooks only (no Kubernetes API)
    kubeconfig: str | None = None
    argo_server: str | None = None
    argo_namespace: str = "argo"
    argo_ui_url: str | None = None
    argo_ca_cert: str | None = None
    argo_insecure: bool = False
    argo_poll_s: float = 5.0
    argo_backoff: Backoff = Backoff()
    slack_channel: str | None = None
    slack_api_url: str = "https://slack.com/api/"
    dry_run: bool = False
    webhook_token_env: str = "REMEDIATOR_WEBHOOK_TOKEN"
    webhook_token_file_env: str = "REMEDIATOR_WEBHOOK_TOKEN_FILE"
    durable_intake: bool = True  # False: webhooks answered from memory (benchmarks only)
    state_busy_timeout_s: float = 5.0  # a write waits this long for a lock on the state file
    inbox_keep_s: float = 3600.0  # webhook inputs are fed again after a restart this long
    inbox_keep_rows: int = 100_000  # ... and at most this many
    inbox_keep_bytes: int = KEEP_BYTES  # ... of at most this many bytes (503 when full)
    runtime: RuntimeSettings = RuntimeSettings()
    lease: LeaseSettings | None = None  # None: no election, this replica always acts
    watch_settings: WatchSettings = WatchSettings()
    max_webhook_pods: int = DEFAULT_MAX_UNWATCHED  # pods known from webhooks alone
    http_idle_timeout_s: float = IDLE_TIMEOUT_S  # a connection with no request is closed
    # With a Lease: the ConfigMap (in its namespace) the learned history and the guard state
    # are shared through, and how often the leader writes them (runtime/shared_state.py).
    state_configmap: str | None = None
    state_share_s: float = 60.0


def load_policy(cfg: ServiceConfig) -> PolicyFile:
    policy = load_policy_file(cfg.policy) if cfg.policy else PolicyFile()
    # The flag can only add safety, never remove the policy's dry run.
    return policy.with_dry_run() if cfg.dry_run else policy


class Service:
    def __init__(
        self, cfg: ServiceConfig, leader: Leadership | None = None, clock: Clock | None = None
    ) -> None:
        self.cfg = cfg
        self.clock = clock or SystemClock()  # one clock for the runtime, outbox and Lease
        self.registry = CollectorRegistry()
        self.session = Session(
            load_policy(cfg), self.registry, keeps_learned=True, wall=self.clock.now
        )
        self.session.tracker.max_unwatched = cfg.max_webhook_pods
        leader = leader or self._leadership()
        self.outbox, self.inbox = self._open_state()
        self.shared = self._shared_state(leader)
        if self.shared is not None:  # before the runtime restores the state file
            keep = self.session.policy.rules.stuck_pod.adaptive.window
            self.shared.seed(keep, self.session.guard.pipeline.load_state)
        self.registry.register(TrackerCollector(self.session.tracker, lambda: self.session.now))
        self.registry.register(node_pace_gauges(lambda: [self.session.decider]))
        self.registry.register(OutboxCollector(self.outbox))
        self.registry.register(HedgeBudgetGauges(lambda: [(self.session.guard, self.session.now)]))
        self.source_metrics = SourceMetrics.on(self.registry)
        self.watches: list[KubeWatch] = []  # before the runtime: it asks them if behind
        dry = self.session.policy.dry_run
        self.runtime = self._runtime(leader, dry)
        self.observers = Observers(self.session, prober=self._prober())
        self._observe_task: asyncio.Task[None] | None = None
        self._watch_said: set[str] = set()  # watches said to be failed or silent
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._run_task: asyncio.Task[None] | None = None

    def _open_state(self) -> tuple[Outbox, Inbox | None]:
        """The outbox and the inbox on the state file; StateFileError if it cannot be used."""
        cfg = self.cfg
        try:
            outbox = Outbox(cfg.state_db, self.clock.now)
            if not cfg.durable_intake:
                return outbox, None
            inbox = Inbox(
                cfg.state_db,
                self.clock.now,
                cfg.state_busy_timeout_s,
                cfg.inbox_keep_s,
                cfg.inbox_keep_rows,
                cfg.inbox_keep_bytes,
            )
        except OPEN_ERRORS as exc:
            raise unusable(cfg.state_db, exc) from None
        return outbox, inbox

    def _runtime(self, leader: Leadership, dry: bool) -> Runtime:
        """The runtime, which reads the guard state back from the state file first."""
        cfg = self.cfg
        metrics, cluster = RuntimeMetrics.on(self.registry), self._argo(dry)
        notifier = self._slack()
        try:
            return Runtime(
                self.session,
                self.outbox,
                leader,
                metrics,
                cluster=cluster,
                notifier=notifier,
                settings=replace(cfg.runtime, workflow_poll_s=cfg.argo_poll_s),
                clock=self.clock,
                sources_ready=self._sources_ready,
                inbox=self.inbox,
                sources_behind=self._sources_behind,
            )
        except (*OPEN_ERRORS, StateError) as exc:
            raise unusable(cfg.state_db, exc) from None

    def _prober(self) -> FirstTokenProber | None:
        cfg = self.session.policy.rules.first_token_probe
        if not cfg.enabled:
            return None
        # Its first tokens are stamped on the session's clock, never the local wall clock.
        clock = self.runtime.driver.cluster.now
        return FirstTokenProber(cfg, self._probed, ProbeMetrics.on(self.registry), clock)

    def _probed(self, inputs: list[Input]) -> None:
        self.runtime.accept(inputs, "probe")

    def _follower(self, api: client.ApiClient) -> EngineLogFollower | None:
        cfg = self.session.policy.rules.engine_logs
        if not cfg.follow:
            return None
        metrics = LogMetrics.on(self.registry)
        return EngineLogFollower(api, cfg, self.runtime.accept_threadsafe, metrics)

    def _leadership(self) -> Leadership:
        if self.cfg.lease is None:
            return Always()
        return LeaseLeadership(api_client(self.cfg.kubeconfig), self.cfg.lease, self.clock)

    def _shared_state(self, leader: Leadership) -> SharedState | None:
        cfg = self.cfg
        if cfg.lease is None or not cfg.state_configmap:
            return None  # one replica: its state file is the history (a claim keeps it)
        store = StateConfigMap(api_client(cfg.kubeconfig), cfg.lease.namespace, cfg.state_configmap)
        return SharedState(store, self.outbox, leader, cfg.state_share_s, self.clock.sleep)

    def _argo(self, dry: bool) -> ArgoExecutor | None:
        if not self.cfg.argo_server:
            if not dry:
                raise ValueError("--argo-server is required unless --dry-run")
            return None
        config = ArgoConfig(
            host=self.cfg.argo_server,
            namespace=self.cfg.argo_namespace,
            ui_url=self.cfg.argo_ui_url,
            verify_ssl=not self.cfg.argo_insecure,
            ca_cert=self.cfg.argo_ca_cert,
        )
        return ArgoExecutor(config, self.cfg.argo_backoff, poll_interval_s=self.cfg.argo_poll_s)

    def _slack_config(self) -> SlackConfig | None:
        if not self.cfg.slack_channel:
            return None
        return SlackConfig(channel=self.cfg.slack_channel, base_url=self.cfg.slack_api_url)

    def _slack(self) -> SlackNotifier | None:
        config = self._slack_config()
        return SlackNotifier(config) if config else None

    def _webhook_token(self) -> str:
        return read_token(self.cfg.webhook_token_env, self.cfg.webhook_token_file_env)

    def _timelines(self) -> list[dict[str, Any]]:
        """Oldest first, as replay prints them; pods seen only through stray events too."""
        tracked = [t for t in self.session.tracker if t.pod_seen or t.state() != "unknown"]
        tracked.sort(key=lambda t: (t.namespace, t.name, t.created or 0.0))
        return [t.to_json() for t in tracked]

    def _sources_ready(self) -> tuple[bool, str]:
        waiting = [w.target.label for w in self.watches if not w.synced.is_set()]
        if waiting:
            return False, f"watches not synced: {', '.join(waiting[:5])}"
        troubled = self._watch_trouble()
        if troubled:
            return False, "; ".join(troubled[:5])
        return True, f"policy loaded; {len(self.watches)} watches synced"

    def _sources_behind(self) -> str | None:
        return pods_behind(self.watches, self.source_metrics)

    async def _probe_watches(self) -> None:
        await probe_forever(self.watches, self.cfg.watch_settings.probe_s, self.clock.sleep)

    def _watch_trouble(self) -> list[str]:
        """Watches that failed (waiting for the supervisor to restart them) or went silent;
        each change is logged once."""
        now = time.monotonic()
        found: dict[str, str] = {}
        for w in self.watches:
            failed = self.runtime.failing(f"watch-{w.target.label}")
            why = f"watch {w.target.label} failed: {failed}" if failed else w.stale(now)
            if why is not None:
                found[w.target.label] = why
        for label, why in found.items():
            if label not in self._watch_said:
                log.error("watch not current: not ready", extra={"watch": label, "error": why})
        for label in self._watch_said - found.keys():
            log.warning("watch current again", extra={"watch": label})
        self._watch_said = set(found)
        return list(found.values())

    async def start(self) -> None:
        self._webhook_token()  # fail at start, not on the first webhook
        listen, idle = Listen.parse(self.cfg.listen), self.cfg.http_idle_timeout_s
        app = make_app(
            self.runtime,
            self.registry,
            self._webhook_token,
            self.source_metrics,
            timelines=self._timelines,
            body_timeout_s=idle,
        )
        self._runner, self.port = await serve_app(app, listen, idle, self.registry)
        self._run_task = asyncio.create_task(self.runtime.run(), name="runtime")
        await asyncio.sleep(0)  # let the runtime bind the loop before watches deliver
        if self.cfg.watch and self.cfg.namespaces:
            api = api_client(self.cfg.kubeconfig)
            found = targets(list(self.cfg.namespaces), self.cfg.warmup_daemonset)
            # Pods are judged on the whole picture: their Events and workloads listed too.
            self.runtime.driver.await_first_lists(
                (t.kind, t.namespace, t.field_selector) for t in found
            )
            for target in found:
                w = KubeWatch(
                    api,
                    target,
                    self.runtime.accept_threadsafe,
                    self.source_metrics,
                    self.cfg.watch_settings,
                )
                self.runtime.supervise(f"watch-{target.label}", w.supervised)
                self.watches.append(w)
            self.runtime.supervise("watch-probe", self._probe_watches)
            self.observers.follower = self._follower(api)
            # A pod is looked at again, from the API server, just before it is deleted.
            engines = self.session.policy.rules.stuck_pod.engine_containers
            self.runtime.worker.look = PodLook(api, engines)
        if self.observers.active:
            self._observe_task = asyncio.create_task(self.observers.run(), name="observers")
        if self.shared is not None:
            self.runtime.supervise("shared-state", self.shared.run)
        log.info(
            "service started",
            extra={"port": self.port, "watches": len(self.watches), "pid": os.getpid()},
        )

    async def wait(self) -> None:
        assert self._run_task is not None
        await self._run_task

    async def stop(self) -> None:
        if self._observe_task is not None:
            self._observe_task.cancel()
            await asyncio.gather(self._observe_task, return_exceptions=True)
        await self.observers.close()
        for w in self.watches:
            w.stop()
        if self.shared is not None:  # the newest history, while it still leads
            await self.shared.share()
        self.runtime.stop()
        if self._run_task is not None:
            await self._run_task
        if self._runner is not None:
            await self._runner.cleanup()
        for w in self.watches:
            await asyncio.to_thread(w.join, 2.0)
        self.outbox.close()
        if self.inbox is not None:
            self.inbox.close()
        log.info("service stopped")


def state_db_default() -> str:
    return str(Path(os.environ.get("TMPDIR", "/tmp")) / "remediator" / "state.db")
