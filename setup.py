"""Packaging is pyproject.toml's; this adds only the optional compiled build.

REMEDIATOR_COMPILE=1 compiles the core's hot modules (pyproject.toml, [tool.remediator]
compiled) to C extensions with mypyc; mypy must then be importable by the build (pip install
--no-build-isolation, as the Dockerfile does). Unset, the package is pure Python, as before.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from setuptools import setup


def _compiled() -> list[str]:
    with (Path(__file__).parent / "pyproject.toml").open("rb") as f:
        modules: list[str] = tomllib.load(f)["tool"]["remediator"]["compiled"]
    return modules


if os.environ.get("REMEDIATOR_COMPILE") == "1":
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(_compiled(), opt_level="3"))
else:
    setup()
