"""A real single-node Apache Kafka broker (KRaft) on 127.0.0.1, from Maven Central's jars.

Stdlib only, so `scripts/kafka` and CI can run it before the venv exists:

    python3 tests/kafka/broker.py fetch          # jars into ~/.cache/remediator-kafka/<v>/lib
    python3 tests/kafka/broker.py up [--dir D]   # format + start; prints bootstrap and pid
    python3 tests/kafka/broker.py status|down [--dir D]

The broker is plain `java -cp <jars> kafka.Kafka server.properties` (no distribution
tarball, no scripts from it). Its JVM is pinned so benchmarks mean something: one CPU
(`taskset -c`, and `-XX:ActiveProcessorCount=1` so its thread pools are sized for one),
a small fixed heap, serial GC. It is stopped by its PID, never by name.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

VERSION = "4.0.2"  # keep in step with tests/kafka/pom.xml
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("REMEDIATOR_KAFKA_CACHE", Path.home() / ".cache" / "remediator-kafka"))
DEFAULT_DIR = Path(os.environ.get("REMEDIATOR_KAFKA_DIR", "/tmp/remediator-kafka"))
HEAP = os.environ.get("REMEDIATOR_KAFKA_HEAP", "512m")
CPUS = os.environ.get("REMEDIATOR_KAFKA_CPUS", "0")  # taskset list; "" leaves it unpinned

LOG4J2 = """\
Configuration:
  Appenders:
    File:
      name: file
      fileName: "{log}"
      PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {{level: INFO, AppenderRef: [{{ref: file}}]}}
    Logger:
      - {{name: kafka.request.logger, level: WARN}}
      - {{name: state.change.logger, level: WARN}}
"""


def lib_dir(version: str = VERSION) -> Path:
    return CACHE / version / "lib"


def fetch(version: str = VERSION) -> float:
    """Copy kafka_2.13 and its runtime dependencies into the cache; seconds it took (0: cached)."""
    lib = lib_dir(version)
    if (lib / f"kafka_2.13-{version}.jar").exists():
        return 0.0
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SystemExit(
            "broker: Maven (mvn) is needed to fetch the Kafka jars: apt-get install maven"
        )
    start = time.monotonic()
    tmp = lib.with_name("lib.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(
        [mvn, "-q", "-B", "-f", str(HERE / "pom.xml"), f"-Dkafka.version={version}",
         "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"],
        check=True,
    )  # fmt: skip
    tmp.rename(lib)  # whole or not at all: an interrupted fetch is retried, never half-used
    return time.monotonic() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass
class Broker:
    """One broker's directory, ports and process. `state.json` in `dir` lets another
    process (scripts/kafka down) find the PID it must stop."""

    dir: Path
    port: int = 0
    controller_port: int = 0
    pid: int | None = None
    version: str = VERSION

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    # ---- lifecycle --------------------------------------------------------------------
    def start(self, timeout: float = 90.0) -> None:
        """Format the storage (first start only) and start the broker; wait until it serves."""
        fetch(self.version)
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port, self.controller_port = free_port(), free_port()
        props = self._write_config()
        if not (self.dir / "data" / "meta.properties").exists():
            # `--cluster-id=ID` in one word: one id in 64 starts with "-", which the tool's
            # argument parser took for an option ("expected one argument")
            self._java("kafka.tools.StorageTool", "format", f"--cluster-id={_cluster_id()}",
                       "-c", str(props), wait=True)  # fmt: skip
        proc = self._java("kafka.Kafka", str(props), wait=False)
        self.pid = proc.pid
        self._save()
        self._wait_serving(proc, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL; only our own PID."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        _reap(pid)
        self._save()

    def kill(self) -> None:
        """SIGKILL: the broker dies mid-write, as a node does when its host fails."""
        if self.pid is not None:
            os.kill(self.pid, signal.SIGKILL)
            _reap(self.pid)
            self.pid = None
            self._save()

    def running(self) -> bool:
        return self.pid is not None and _alive(self.pid)

    # ---- details ----------------------------------------------------------------------
    def _write_config(self) -> Path:
        props = self.dir / "server.properties"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.dir / "data"),
            "num.partitions": "1",
            # Topics are created explicitly; an auto-created one would get the wrong count.
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
        }  # fmt: skip
        props.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (self.dir / "log4j2.yaml").write_text(LOG4J2.format(log=self.dir / "server.log"))
        return props

    def _java(self, main: str, *args: str, wait: bool) -> subprocess.Popen[bytes]:
        java = shutil.which("java")
        if java is None:
            raise SystemExit(
                "broker: a Java 17+ runtime is needed: apt-get install default-jre-headless"
            )
        cmd = [java, f"-Xms{HEAP}", f"-Xmx{HEAP}", "-XX:ActiveProcessorCount=1", "-XX:+UseSerialGC",
               "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={self.dir / 'log4j2.yaml'}",
               "-cp", str(lib_dir(self.version) / "*"), main, *args]  # fmt: skip
        if CPUS and shutil.which("taskset"):
            cmd = ["taskset", "-c", CPUS, *cmd]
        out = open(self.dir / ("format.out" if wait else "stdout.log"), "ab")  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        if wait and proc.wait() != 0:
            tail = (self.dir / "format.out").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"broker: {main} exited {proc.returncode}:\n{tail}")
        return proc

    def _wait_serving(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        log = self.dir / "server.log"
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"broker exited with {proc.returncode}; see {log}")
            if log.exists() and "Kafka Server started" in log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise TimeoutError(f"broker not serving after {timeout}s; see {log}")

    def _save(self) -> None:
        state = {"port": self.port, "controller_port": self.controller_port, "pid": self.pid}
        (self.dir / "state.json").write_text(json.dumps(state))

    @classmethod
    def load(cls, directory: Path) -> Broker:
        state = json.loads((directory / "state.json").read_text())
        return cls(directory, state["port"], state["controller_port"], state["pid"])


def _alive(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    except ChildProcessError:
        pass  # not our child (scripts/kafka down from another shell): ask the kernel
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        while _alive(pid):
            time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch", "up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        took = fetch()
        print(f"kafka {VERSION}: {lib_dir()} ({f'fetched in {took:.1f}s' if took else 'cached'})")
        return 0
    state = args.dir / "state.json"
    known = Broker.load(args.dir) if state.exists() else None
    if args.command == "up":
        if known is not None and known.running():
            print(f"already up: {known.bootstrap} pid {known.pid}")
            return 0
        broker = Broker(args.dir)
        broker.start()
        print(f"up: {broker.bootstrap} pid {broker.pid} dir {args.dir}")
        return 0
    if args.command == "down":
        if known is not None:
            known.stop()
        shutil.rmtree(args.dir, ignore_errors=True)
        print("down")
        return 0
    if known is not None and known.running():
        print(f"up: {known.bootstrap} pid {known.pid}")
        return 0
    print("down")
    return 1


if __name__ == "__main__":
    sys.exit(main())
