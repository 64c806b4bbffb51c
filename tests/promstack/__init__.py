"""The real Prometheus and Alertmanager (Debian packages `prometheus`, `prometheus-alertmanager`),
started on 127.0.0.1 ports for one test: the PrometheusRule and the Alertmanager receiver config
from deploy/, a data directory under tmp, stopped by PID.

Only the timings are shortened (scrape and evaluation interval, `for:`, group_wait/interval,
repeat_interval); what the rules compute and where the alerts go is what deploy/ ships.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
ALERTMANAGER_CONFIG = MONITORING / "alertmanager" / "alertmanager.yaml"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # scripts/test installs them; a bare machine says how
        pytest.fail(f"{name} not installed: apt-get install prometheus prometheus-alertmanager")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Timings:
    """Fastest realistic: 1 s scrape and evaluation, the alert after 3 evaluations, no wait."""

    scrape: str = "1s"
    evaluation: str = "1s"
    alert_for: str = "2s"  # deploy: 2m at 1m, i.e. true at three evaluations in a row
    group_wait: str = "0s"
    group_interval: str = "1s"
    repeat_interval: str = "2s"
    resend_delay: str = "1s"


def rule_groups(timings: Timings, alert_for: dict[str, str] | None = None) -> dict[str, Any]:
    """The PrometheusRule's groups as a rules file, at the test's evaluation interval."""
    rule = yaml.safe_load(PROMETHEUS_RULE.read_text())
    groups = rule["spec"]["groups"]
    for group in groups:
        group["interval"] = timings.evaluation
        for r in group["rules"]:
            if "for" in r:
                r["for"] = (alert_for or {}).get(r.get("alert", ""), timings.alert_for)
    return {"groups": groups}


def alertmanager_config(webhook_url: str, token_file: Path, timings: Timings) -> dict[str, Any]:
    """deploy/'s route and receivers, the remediator receiver pointed at serve; Slack (for
    people) at a closed loopback port, so nothing leaves the machine."""
    cfg = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    cfg["global"]["slack_api_url"] = f"http://127.0.0.1:{free_port()}/slack"
    for route in [cfg["route"], *cfg["route"].get("routes", [])]:
        route["group_wait"] = timings.group_wait
        route["group_interval"] = timings.group_interval
        route["repeat_interval"] = timings.repeat_interval
    hook = next(r for r in cfg["receivers"] if r["name"] == "remediator")["webhook_configs"][0]
    hook["url"] = webhook_url
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return cfg


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # by PID: only the process this test started
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return orjson.loads(r.read())

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _start(name: str, argv: list[str], port: int, ready: str, tmp: Path) -> Process:
    log = tmp / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
    p = Process(name, proc, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited {proc.returncode}:\n{p.tail()}")
        try:
            with urllib.request.urlopen(p.url + ready, timeout=1) as r:
                if r.status == 200:
                    return p
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    p.stop()
    raise RuntimeError(f"{name} not ready in 30 s:\n{p.tail()}")


@dataclass
class Stack:
    prometheus: Process
    alertmanager: Process
    started: list[Process] = field(default_factory=list)

    def stop(self) -> None:
        for p in reversed(self.started):
            p.stop()

    def query(self, expr: str) -> list[dict[str, Any]]:
        from urllib.parse import quote

        doc = self.prometheus.get(f"/api/v1/query?query={quote(expr)}")
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """Alerts Alertmanager holds now (active, silenced or inhibited)."""
        result: list[dict[str, Any]] = self.alertmanager.get("/api/v2/alerts")
        return result


def start_alertmanager(tmp: Path, cfg: dict[str, Any]) -> Process:
    d = tmp / "alertmanager"
    d.mkdir(parents=True, exist_ok=True)
    (d / "alertmanager.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    argv = [
        binary("prometheus-alertmanager"),
        f"--config.file={d / 'alertmanager.yml'}",
        f"--storage.path={d / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",  # no gossip: one instance, no extra port
    ]
    return _start("alertmanager", argv, port, "/-/ready", d)


def start_prometheus(
    tmp: Path,
    targets: dict[str, str],
    timings: Timings,
    rules: dict[str, Any] | None = None,
    alertmanager: str | None = None,
) -> Process:
    """`targets`: job name → host:port of a /metrics to scrape."""
    d = tmp / "prometheus"
    d.mkdir(parents=True, exist_ok=True)
    cfg: dict[str, Any] = {
        "global": {"scrape_interval": timings.scrape, "evaluation_interval": timings.evaluation},
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [target]}]}
            for job, target in targets.items()
        ],
    }
    if rules is not None:
        (d / "rules.yml").write_text(yaml.safe_dump(rules))
        cfg["rule_files"] = [str(d / "rules.yml")]
    if alertmanager is not None:
        target = alertmanager.removeprefix("http://")
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
    (d / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    argv = [
        binary("prometheus"),
        f"--config.file={d / 'prometheus.yml'}",
        f"--storage.tsdb.path={d / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--rules.alert.resend-delay={timings.resend_delay}",
    ]
    return _start("prometheus", argv, port, "/-/ready", d)


def wait_for(
    check: Callable[[], Any], timeout: float, what: str, stack: Stack | None = None
) -> Any:
    """Poll (blocking) until truthy; fail with the servers' logs, never hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    logs = "" if stack is None else f"\n{stack.prometheus.tail()}\n{stack.alertmanager.tail()}"
    raise AssertionError(f"timed out waiting for {what}{logs}")
