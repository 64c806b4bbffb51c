"""Every form of the kubelet's image and container messages since 1.19, table-driven."""

from __future__ import annotations

import pytest

from remediator.inputs.kubelet import (
    container_from_field_path,
    container_from_message,
    parse_pulled,
)

IMG = "vllm/vllm-openai:v0.6.3"

# (message, image, seconds, including_waiting, size, already_present)
PULLED = [
    # 1.20 – 1.27: the pull time alone
    (f'Successfully pulled image "{IMG}" in 49.657983991s', IMG, 49.657983991, None, None, False),
    # 1.28+: "including waiting" (time queued behind other pulls with serialized pulls)
    (f'Successfully pulled image "{IMG}" in 2m1.5s (2m3s including waiting)', IMG, 121.5, 123.0,
     None, False),
    # 1.29+: and the image size — verbatim from the real v1.31 EventList (redis-0)
    ('Successfully pulled image "redis:latest" in 13.996s (13.996s including waiting). '
     "Image size: 116976307 bytes.", "redis:latest", 13.996, 13.996, 116976307, False),
    (f'Successfully pulled image "{IMG}" in 717ms (1.2s including waiting). '
     "Image size: 9876543210 bytes.", IMG, 0.717, 1.2, 9876543210, False),
    (f'Successfully pulled image "{IMG}" in 1h2m3.5s (1h2m3.5s including waiting)', IMG,
     3723.5, 3723.5, None, False),
    (f'Successfully pulled image "{IMG}" in 1m2.5s', IMG, 62.5, None, None, False),
    # before 1.20: no duration at all
    (f'Successfully pulled image "{IMG}"', IMG, None, None, None, False),
    # imagePullPolicy IfNotPresent with the image cached — verbatim from kube-system (coredns)
    ('Container image "registry.k8s.io/coredns/coredns:v1.11.1" already present on machine',
     "registry.k8s.io/coredns/coredns:v1.11.1", None, None, None, True),
    # text we do not know: nothing guessed
    ("something else entirely", None, None, None, None, False),
    (f'Successfully pulled image "{IMG}" in forever', IMG, None, None, None, False),
]  # fmt: skip


@pytest.mark.parametrize(("message", "image", "seconds", "waiting", "size", "present"), PULLED)
def test_pulled_forms(
    message: str,
    image: str | None,
    seconds: float | None,
    waiting: float | None,
    size: int | None,
    present: bool,
) -> None:
    info = parse_pulled(message)
    assert info.image == image
    assert info.seconds == (pytest.approx(seconds) if seconds is not None else None)
    assert info.including_waiting == (pytest.approx(waiting) if waiting is not None else None)
    assert info.size_bytes == size
    assert info.already_present is present
    # The figure for the phase: the waiting-inclusive one, else the pull alone.
    expected = waiting if waiting is not None else seconds
    assert info.reported == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("message", "container"),
    [
        ("Created container redis", "redis"),  # verbatim from v1.31
        ("Created container: vllm", "vllm"),  # 1.32+
        ("Started container vllm", "vllm"),
        ("Started container: vllm", "vllm"),
        ("Container created", None),  # container runtimes' own wording: no name in it
        ("Container started", None),
        ("Stopping container redis", None),
    ],
)
def test_container_messages(message: str, container: str | None) -> None:
    assert container_from_message(message) == container


@pytest.mark.parametrize(
    ("field_path", "container"),
    [
        ("spec.containers{redis}", "redis"),
        ("spec.initContainers{model-fetch}", "model-fetch"),
        ("spec.ephemeralContainers{debugger}", "debugger"),
        ("spec.containers{}", None),
        ("spec.containers", None),
        ("", None),
        (None, None),
    ],
)
def test_field_path(field_path: str | None, container: str | None) -> None:
    assert container_from_field_path(field_path) == container
