"""Argo Events as local processes on a real NATS JetStream EventBus: what the argo-events
controller would run as pods, started here from the same objects.

- EventBus: `nats-server -js` on 127.0.0.1 with TLS (the argo-events JetStream client always
  dials TLS; the certificate is made here with openssl, like the cluster's).
- EventSource: `argo-events eventsource-service` with the EventSource from sensors/ as
  EVENTSOURCE_OBJECT, as its ServiceAccount (remediator-eventsource, sensors/common/rbac.yaml).
- Sensor: `argo-events sensor-service` with the Sensor from sensors/ as SENSOR_OBJECT. Its
  triggers' URL is the one thing changed: the in-cluster Service name becomes serve's loopback
  address. Its secureHeaders secret is read from files laid out as the pod's secret mount
  ($ARGO_EVENTS_SECRETS_ROOT/<secret>/<key>, a build patch: see tests/cluster/build-argo).

Each process is started and stopped by PID; logs go to the given folder.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.live.harness import LiveCluster, free_port, wait_for

REPO = Path(__file__).resolve().parents[3]
STREAM_CONFIG = "maxMsgs: 100000\nmaxAge: 1h\nmaxBytes: -1\nreplicas: 1\nduplicates: 300s\n"


def manifest(path: str, kind: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((REPO / path).read_text())
    return next(d for d in docs if d and d["kind"] == kind)


def b64(doc: Any) -> str:
    return base64.b64encode(json.dumps(doc).encode()).decode()


@dataclass
class ArgoEvents:
    live: LiveCluster
    bin: Path
    workdir: Path
    serve_url: str  # http://127.0.0.1:PORT of `remediator serve`
    webhook_token: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    nats_port: int = 0

    def __enter__(self) -> ArgoEvents:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._nats()
            self._secrets()
            bus = {"jetstream": {"url": f"nats://127.0.0.1:{self.nats_port}",
                                 "streamConfig": STREAM_CONFIG}}  # fmt: skip
            source = manifest("sensors/common/eventsource-inference-workloads.yaml", "EventSource")
            self._start("eventsource", "eventsource-service", {
                "EVENTSOURCE_OBJECT": b64(source),
                "EVENTBUS_CONFIG": b64(bus),
                "EVENTBUS_SUBJECT": "eventbus-default",
                "POD_NAME": "inference-workloads-eventsource-0",
                "KUBECONFIG": str(self.live.sa_kubeconfig("argo-events", "remediator-eventsource")),
            })  # fmt: skip
            self._start("sensor", "sensor-service", {
                "SENSOR_OBJECT": b64(self.sensor()),
                "EVENTBUS_CONFIG": b64(bus),
                "EVENTBUS_SUBJECT": "eventbus-default",
                "POD_NAME": "image-update-to-remediator-sensor-0",
                "ARGO_EVENTS_SECRETS_ROOT": str(self.workdir / "secrets"),
                # The Sensor names no ServiceAccount: its pod would run as `default`.
                "KUBECONFIG": str(self.live.sa_kubeconfig("argo-events", "default")),
            })  # fmt: skip
            for name in ("eventsource", "sensor"):
                wait_for(lambda n=name: self._logged(n, "Connected to NATS Jetstream"), 60, name)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(15)
        self.procs.clear()

    def sensor(self) -> dict[str, Any]:
        doc = manifest("sensors/sensor-image-update-to-remediator.yaml", "Sensor")
        for trigger in doc["spec"]["triggers"]:
            http = trigger["template"]["http"]
            assert http["url"] == "http://remediator.remediator.svc:8080/events", http["url"]
            http["url"] = f"{self.serve_url}/events"
        return doc

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    # -- internals ---------------------------------------------------------------------------
    def _logged(self, name: str, text: str) -> bool:
        proc = self.procs[name]
        if proc.poll() is not None:
            raise AssertionError(f"{name} exited {proc.returncode}:\n{self.log(name)[-3000:]}")
        return text in self.log(name)

    def _secrets(self) -> None:
        """The Sensor's secureHeaders secret, where the pod would have it mounted."""
        secret = manifest("sensors/sensor-image-update-to-remediator.yaml", "Sensor")
        ref = secret["spec"]["triggers"][0]["template"]["http"]["secureHeaders"][0]
        key = ref["valueFrom"]["secretKeyRef"]
        path = self.workdir / "secrets" / key["name"] / key["key"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"Bearer {self.webhook_token}")

    def _nats(self) -> None:
        tls = self.workdir / "nats-tls"
        tls.mkdir(exist_ok=True)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(tls / "key.pem"), "-out", str(tls / "cert.pem")],
            check=True, capture_output=True,
        )  # fmt: skip
        self.nats_port = free_port()
        args = ["-a", "127.0.0.1", "-p", str(self.nats_port), "-js",
                "-sd", str(self.workdir / "jetstream"), "--tls",
                "--tlscert", str(tls / "cert.pem"), "--tlskey", str(tls / "key.pem")]  # fmt: skip
        self._spawn("nats-server", [str(self.bin / "nats-server"), *args], {})
        wait_for(lambda: _port_open(self.nats_port), 30, "nats-server")

    def _start(self, name: str, command: str, env: dict[str, str]) -> None:
        metrics = {"ARGO_EVENTS_METRICS_PORT": str(free_port())}
        self._spawn(name, [str(self.bin / "argo-events"), command], {**metrics, **env})

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = (self.workdir / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            argv,
            env={**os.environ, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
        )
        log.close()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        time.sleep(0.1)
        return False
