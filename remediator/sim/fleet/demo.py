"""Placeholder replaced below."""

from __future__ import annotations


def run_demo(scenario_file: str | None, *, speed: float, seconds: float, seed: int,
             plain: bool) -> None:  # fmt: skip
    raise NotImplementedError
