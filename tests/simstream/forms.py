"""Text as the API server and the kubelet write it: timestamps, Go durations, messages.

Every writer returns exactly what a reader will parse back, so ground truth can be
computed from the written values rather than from the (finer) drawn ones.
"""

from __future__ import annotations

from datetime import UTC, datetime

from remediator.sim.fleet.kube import go_duration

# Kubelet `Pulled` message forms, oldest first. "ms" is a sub-second pull (a warm layer
# cache), which Go prints in milliseconds; "present" is a warm node.
PULL_FORMS = ("old", "in", "waiting", "size", "ms", "present")
# `Created` message forms across kubelet versions and runtimes.
CREATED_FORMS = ("plain", "colon", "bare")
_NS = 1_000_000_000


def rfc3339(seconds: int) -> str:
    """metav1.Time: whole seconds, `Z`."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(us: int) -> str:
    """metav1.MicroTime (Event eventTime, series.lastObservedTime): microseconds, `Z`."""
    whole, frac = divmod(us, 1_000_000)
    return f"{rfc3339(whole)[:-1]}.{frac:06d}Z"


def truncate_ms(ns: int) -> int:
    """Duration.Truncate(time.Millisecond), as kubelet 1.28+ prints pull times."""
    return ns - ns % 1_000_000


def pulled_message(form: str, image: str, pull_ns: int, waiting_ns: int, size: int) -> str:
    """The `Pulled` event message of each kubelet era (images/image_manager.go)."""
    if form == "present":
        return f'Container image "{image}" already present on machine'
    if form == "old":
        return f'Successfully pulled image "{image}"'
    if form == "in":
        return f'Successfully pulled image "{image}" in {go_duration(pull_ns)}'
    pull, waited = go_duration(truncate_ms(pull_ns)), go_duration(truncate_ms(waiting_ns))
    text = f'Successfully pulled image "{image}" in {pull} ({waited} including waiting)'
    return text if form in ("waiting", "ms") else f"{text}. Image size: {size} bytes."


def reported_pull_seconds(form: str, pull_ns: int, waiting_ns: int) -> float | None:
    """The figure a reader must take from the message: waiting-inclusive when printed."""
    if form in ("present", "old"):
        return None
    if form == "in":
        return pull_ns / _NS
    return truncate_ms(waiting_ns) / _NS


def created_message(form: str, container: str) -> str:
    if form == "colon":
        return f"Created container: {container}"
    return "Container created" if form == "bare" else f"Created container {container}"


def started_message(form: str, container: str) -> str:
    # Kubelets that write `Created container: x` also write `Started container: x`.
    return (
        f"Started container: {container}" if form == "colon" else f"Started container {container}"
    )
