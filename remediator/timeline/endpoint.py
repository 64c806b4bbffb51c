"""Where an inference pod's OpenAI-compatible server answers: what a first-token probe needs."""

from __future__ import annotations

import msgspec


class Endpoint(msgspec.Struct, frozen=True, gc=False):
    container: str | None  # the main (GPU) container: whose log holds vLLM's steps
    ip: str | None  # status.podIP, once the pod has one
    port: int | None  # the pod's --port, when its args name one
    model: str | None  # --served-model-name, else --model


def port_of(text: str | None) -> int | None:
    if text is None or not text.isdigit() or not 0 < int(text) < 65536:
        return None
    return int(text)
