"""What the kubelet's image and container event messages say, in every form since 1.19.

Forms handled (kubelet `images/image_manager.go` and `kuberuntime_container.go` history):
  Successfully pulled image "x" in 49.657983991s
  Successfully pulled image "x" in 1.629s (1.629s including waiting)
  Successfully pulled image "x" in 13.996s (13.996s including waiting). Image size: 116976307 bytes.
  Successfully pulled image "x" in 2m1.5s (2m3s including waiting)
  Successfully pulled image "x"                                  (before 1.20: no duration)
  Container image "x" already present on machine
  Created container x | Created container: x | Container created
  Started container x | Started container: x
"""

from __future__ import annotations

import re

import msgspec

from remediator.inputs.timefmt import parse_go_duration

_DUR = r"((?:\d+(?:\.\d*)?(?:ns|us|µs|μs|ms|s|m|h))+)"
_PULLED_IN = re.compile(r"\bin " + _DUR + r"(?: \(" + _DUR + r" including waiting\))?")
_IMAGE_SIZE = re.compile(r"Image size: (\d+) bytes")
_IMAGE_NAME = re.compile(r'[Ii]mage "([^"]+)"')
_CONTAINER_NAME = re.compile(r"(?:Created|Started) container:? (\S+)")


class PullInfo(msgspec.Struct, frozen=True, gc=False):
    image: str | None
    seconds: float | None  # the pull itself
    including_waiting: float | None  # pull plus time queued behind other pulls
    size_bytes: int | None
    already_present: bool

    @property
    def reported(self) -> float | None:
        """The figure to use for the phase: the waiting-inclusive one when present."""
        return self.including_waiting if self.including_waiting is not None else self.seconds


def parse_pulled(message: str) -> PullInfo:
    """Parse the message of a `Pulled` event. Never raises: unknown text → all None."""
    name = _IMAGE_NAME.search(message)
    image = name.group(1) if name else None
    if already_present(message):
        return PullInfo(image, None, None, None, True)
    seconds, waiting = _pull_durations(message)
    size = _IMAGE_SIZE.search(message)
    return PullInfo(image, seconds, waiting, int(size.group(1)) if size else None, False)


def already_present(message: str) -> bool:
    return "already present on machine" in message


def pull_seconds(message: str) -> float | None:
    """`parse_pulled(message).reported` of a pull: the timeline's one need, without the
    image name and size searches (one Pulled event per pod)."""
    seconds, waiting = _pull_durations(message)
    return waiting if waiting is not None else seconds


def _pull_durations(message: str) -> tuple[float | None, float | None]:
    m = _PULLED_IN.search(message)
    if not m:
        return None, None
    try:
        return parse_go_duration(m.group(1)), (
            parse_go_duration(m.group(2)) if m.group(2) else None
        )
    except ValueError:
        return None, None


def container_from_message(message: str) -> str | None:
    """The container named in a Created/Started message, if it names one."""
    m = _CONTAINER_NAME.search(message)
    return m.group(1) if m else None


def container_from_field_path(field_path: str | None) -> str | None:
    """`spec.containers{vllm}` / `spec.initContainers{prepull}` → the container name."""
    if not field_path:
        return None
    start = field_path.find("{")
    if start < 0 or not field_path.endswith("}"):
        return None
    return field_path[start + 1 : -1] or None
