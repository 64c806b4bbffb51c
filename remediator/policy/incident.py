"""Deterministic incident ids: the same cause always gets the same id."""

from __future__ import annotations

import hashlib


def incident_id(kind: str, *parts: str) -> str:
    digest = hashlib.sha256("\x00".join((kind, *parts)).encode()).hexdigest()[:12]
    return f"{kind}-{digest}"
