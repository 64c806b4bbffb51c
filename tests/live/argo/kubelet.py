"""The part of a kubelet that kwok cannot play for Argo's step pods: running the container.

argoexec does not run under kwok (there is no container runtime), so nothing in a step pod
executes. The workflow-controller is configured to hold every step pod (`argo.py`'s hold_steps:
the annotation argo-step.remediator.dev/hang=true through workflowDefaults); this runner then
takes each held pod's own `main` command line as the controller wrote it, runs it here (each pod
beside the others, as a kubelet runs them) as that pod's ServiceAccount (a token bound to the
pod, as the kubelet projects one) against the real API server, and releases the pod with the
exit code it got. The kwok Stage (tests/cluster/stages/argo-step.yaml) ends the pod with that
code; the controller reads it from the pod status like any kubelet's. A test can also end a step
without running it (`fail_next`): the pod then fails by annotation alone. Only pods created
while the runner runs are carried out: a held pod left by an earlier test is not this test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.live.harness import LiveCluster

REPO = Path(__file__).resolve().parents[3]
ARGO_NS = "argo"
WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
HOLD = "argo-step.remediator.dev/hang"
EXIT_CODE = "argo-step.remediator.dev/exit-code"


@dataclass(frozen=True)
class Ran:
    """One step pod carried out: what ran, as whom, and how it ended."""

    workflow: str
    pod: str
    service_account: str
    argv: tuple[str, ...]
    env: dict[str, str]
    exit_code: int
    output: str
    executed: bool  # False: ended by annotation only (fail_next)


def step_argv(pod: dict[str, Any]) -> list[str]:
    """The `main` container's command line as the step runs it: Argo's emissary wraps the
    template's command (`/var/run/argo/argoexec emissary ... -- remediator step ...`)."""
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    argv = [*main.get("command", []), *main.get("args", [])]
    if len(argv) > 1 and argv[0].endswith("/argoexec") and argv[1] == "emissary":
        argv = argv[argv.index("--") + 1 :]
    return argv


def step_env(pod: dict[str, Any]) -> dict[str, str]:
    main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    return {e["name"]: e["value"] for e in main.get("env", []) if "value" in e}


@dataclass
class StepRunner:
    live: LiveCluster
    workdir: Path
    poll_s: float = 0.1
    ran: list[Ran] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _fail: list[tuple[str, int]] = field(default_factory=list)
    _since: str = ""
    _seen: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _workers: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> StepRunner:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # as creationTimestamp
        self._thread = threading.Thread(target=self._loop, name="argo-step-runner", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        for worker in self._workers:  # (a step still running is the test's to fail on)
            worker.join(30)

    def fail_next(self, target: str, exit_code: int) -> None:
        """The next held step whose command line names `target` ends with this exit code, by
        annotation, without running."""
        with self._lock:
            self._fail.append((target, exit_code))

    def runs(self, workflow: str) -> list[Ran]:
        with self._lock:
            return [r for r in self.ran if r.workflow == workflow]

    # -- loop --------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for pod in self._held():
                    # Each pod's container runs beside the others', as on a kubelet: two
                    # workflows' steps (two hedges of one Deployment) run at once.
                    self._seen.add(pod["metadata"]["uid"])
                    worker = threading.Thread(target=self._carry_reporting, args=(pod,),
                                              name="argo-step", daemon=True)  # fmt: skip
                    self._workers.append(worker)
                    worker.start()
            except Exception as exc:  # noqa: BLE001 - reported to the test, never swallowed
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.poll_s)

    def _carry_reporting(self, pod: dict[str, Any]) -> None:
        try:
            self._carry(pod)
        except Exception as exc:  # noqa: BLE001 - reported to the test, never swallowed
            with self._lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _held(self) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{ARGO_NS}/pods?labelSelector={WORKFLOW_LABEL}"
        pods = self.live.api("GET", path)["items"]
        return [
            p
            for p in pods
            if p["metadata"]["uid"] not in self._seen
            and p["metadata"]["creationTimestamp"] >= self._since
            and p["metadata"].get("annotations", {}).get(HOLD) == "true"
            and p.get("status", {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]

    def _carry(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        argv, env = step_argv(pod), step_env(pod)
        sa = pod["spec"].get("serviceAccountName", "default")
        with self._lock:
            forced = None
            for i, (target, exit_code) in enumerate(self._fail):
                if target in argv:
                    forced = exit_code
                    del self._fail[i]
                    break
        if forced is not None:
            code, output, executed = forced, "", False
        else:
            code, output = self._run(pod, sa, argv, env)
            executed = True
        self._release(meta["name"], code)
        ran = Ran(meta["labels"][WORKFLOW_LABEL], meta["name"], sa, tuple(argv), env, code,
                  output, executed)  # fmt: skip
        with self._lock:
            self.ran.append(ran)

    def _run(
        self, pod: dict[str, Any], sa: str, argv: list[str], env: dict[str, str]
    ) -> tuple[int, str]:
        if not argv or argv[0] != "remediator":
            return 127, f"not a remediator step: {argv}"
        kubeconfig = self._pod_kubeconfig(pod, sa)
        full_env = {**os.environ, **env, "KUBECONFIG": str(kubeconfig)}
        full_env.pop("KUBERNETES_SERVICE_HOST", None)
        out = subprocess.run(
            [sys.executable, "-m", "remediator", *argv[1:]],
            cwd=REPO,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return out.returncode, out.stdout + out.stderr

    def _pod_kubeconfig(self, pod: dict[str, Any], sa: str) -> Path:
        """A token for the pod's ServiceAccount, bound to the pod (what the kubelet projects)."""
        meta = pod["metadata"]
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        path = f"/api/v1/namespaces/{ARGO_NS}/serviceaccounts/{sa}/token"
        token = self.live.api("POST", path, request)["status"]["token"]
        raw = self.live.raw
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "live", "cluster": {"server": raw.server,
                                             "certificate-authority": str(raw.pki / "ca.crt")}}
            ],
            "users": [{"name": sa, "user": {"token": token}}],
            "contexts": [{"name": sa, "context": {"cluster": "live", "user": sa}}],
            "current-context": sa,
        }  # fmt: skip
        file = self.workdir / f"{meta['name']}.kubeconfig"
        file.write_text(json.dumps(config))
        return file

    def _release(self, pod: str, code: int) -> None:
        patch = {"metadata": {"annotations": {EXIT_CODE: str(code), HOLD: "false"}}}
        for _ in range(3):
            try:
                self.live.api(
                    "PATCH",
                    f"/api/v1/namespaces/{ARGO_NS}/pods/{pod}",
                    patch,
                    ctype="application/merge-patch+json",
                )
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return
                time.sleep(0.2)
