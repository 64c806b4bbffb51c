"""Restart a DaemonSet the way `kubectl rollout restart` does, and wait like
`kubectl rollout status`. Optionally point the warmup's pre-pull init container
at a new image first, in the same patch, so one rollout both pulls and warms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.steps.errors import StepError
from remediator.steps.kube import API_ERRORS, REQUEST_TIMEOUT, TRANSPORT_ERRORS, api_failure
from remediator.steps.report import ExitCode

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


@dataclass(frozen=True, slots=True)
class Progress:
    done: bool
    message: str


def progress(
    target_generation: int,
    observed_generation: int | None,
    desired: int,
    updated: int | None,
    available: int | None,
) -> Progress:
    """kubectl's DaemonSet status check, against the generation our patch made."""
    if observed_generation is None or observed_generation < target_generation:
        return Progress(False, "waiting for the daemon set spec update to be observed")
    if (updated or 0) < desired:
        return Progress(False, f"{updated or 0} out of {desired} new pods have been updated")
    if (available or 0) < desired:
        return Progress(False, f"{available or 0} of {desired} updated pods are available")
    return Progress(True, f"successfully rolled out: {desired} of {desired} updated and available")


def _read(apps: client.AppsV1Api, namespace: str, name: str) -> client.V1DaemonSet:
    try:
        return apps.read_namespaced_daemon_set(name, namespace, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        if e.status == 404:
            raise StepError(
                ExitCode.PRECONDITION, "not_found", f"daemonset {namespace}/{name} not found"
            ) from e
        raise api_failure(e, f"read daemonset {namespace}/{name}") from e
    except TRANSPORT_ERRORS as e:
        raise api_failure(e, f"read daemonset {namespace}/{name}") from e


def _check(ds: client.V1DaemonSet, name: str, image: str | None, container: str) -> None:
    """Refuse, before changing anything, what a restart could not do right."""
    spec = ds.spec
    strategy = spec.update_strategy.type if spec and spec.update_strategy else None
    if strategy not in (None, "RollingUpdate"):
        raise StepError(
            ExitCode.PRECONDITION,
            "not_rolling_update",
            f"daemonset {name} uses updateStrategy {strategy}: a restart would not replace "
            "its pods; they must be deleted",
        )
    if image is None:
        return
    pod_spec = spec.template.spec if spec else None
    inits = [c.name for c in ((pod_spec.init_containers if pod_spec else None) or [])]
    if container not in inits:
        # A strategic merge would add a new init container rather than fail: refuse.
        raise StepError(
            ExitCode.PRECONDITION,
            "no_such_init_container",
            f"daemonset {name} has no init container {container!r} (has: {inits or 'none'})",
        )


def restart_patch(restarted_at: str, image: str | None, container: str) -> dict[str, Any]:
    """A strategic merge patch: containers merge by name, so only `container` changes."""
    template: dict[str, Any] = {"metadata": {"annotations": {RESTARTED_AT: restarted_at}}}
    if image is not None:
        template["spec"] = {"initContainers": [{"name": container, "image": image}]}
    return {"spec": {"template": template}}


def restart(
    apps: client.AppsV1Api,
    namespace: str,
    name: str,
    image: str | None,
    container: str,
    restarted_at: str,
    dry_run: bool,
) -> int:
    """Patch the pod template; returns the generation the rollout must reach."""
    _check(_read(apps, namespace, name), f"{namespace}/{name}", image, container)
    try:
        patched = apps.patch_namespaced_daemon_set(
            name,
            namespace,
            restart_patch(restarted_at, image, container),
            dry_run="All" if dry_run else None,
            _request_timeout=REQUEST_TIMEOUT,
        )
    except API_ERRORS as e:
        raise api_failure(e, f"patch daemonset {namespace}/{name}") from e
    return int((patched.metadata.generation if patched.metadata else None) or 0)


def wait(
    apps: client.AppsV1Api,
    namespace: str,
    name: str,
    generation: int,
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    on_change: Callable[[Progress], None],
) -> Progress:
    """Poll until rolled out or `timeout_s` passes; returns the last progress seen."""
    deadline = clock() + timeout_s
    last: Progress | None = None
    while True:
        status = _read(apps, namespace, name).status or client.V1DaemonSetStatus(
            current_number_scheduled=0,
            desired_number_scheduled=0,
            number_misscheduled=0,
            number_ready=0,
        )
        now = progress(
            generation,
            status.observed_generation,
            status.desired_number_scheduled,
            status.updated_number_scheduled,
            status.number_available,
        )
        if now != last:
            on_change(now)
            last = now
        if now.done or clock() >= deadline:
            return now
        sleep(max(0.0, min(poll_s, deadline - clock())))
