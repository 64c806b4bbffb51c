"""Tokens from the environment or a mounted file; never logged, never in a repr."""

from __future__ import annotations

import os
from pathlib import Path


class MissingSecret(RuntimeError):
    """No token where the configuration says one is. The message names where it
    looked, never a value."""


def read_token(env: str, file_env: str, file: str | None = None) -> str:
    """`$env` if set, else the file named by `file` or `$file_env`. The file is
    re-read on each call, so a rotated, mounted token is picked up."""
    value = os.environ.get(env, "").strip()
    if value:
        return value
    path = file or os.environ.get(file_env, "").strip()
    if not path:
        raise MissingSecret(f"set ${env} or ${file_env}")
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise MissingSecret(f"token file {path!r} cannot be read: {err.strerror}") from None
    if not value:
        raise MissingSecret(f"token file {path!r} is empty")
    return value
