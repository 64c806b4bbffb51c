"""The compiled core's list (pyproject.toml, [tool.remediator] compiled) names modules that
are there, and, on the compiled copy `scripts/compiled` makes, each of them runs compiled:
the unit suite's second run there proves the listed modules, not the pure-Python ones."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _listed() -> list[str]:
    with (REPO / "pyproject.toml").open("rb") as f:
        modules: list[str] = tomllib.load(f)["tool"]["remediator"]["compiled"]
    return modules


def test_each_listed_module_is_a_module_of_the_package() -> None:
    listed = _listed()
    assert listed and len(set(listed)) == len(listed)
    for path in listed:
        assert path.startswith("remediator/") and path.endswith(".py"), path
        assert (REPO / path).is_file(), path


def test_on_the_compiled_copy_each_listed_module_is_compiled() -> None:
    engine = importlib.import_module("remediator.policy.engine")
    if str(engine.__file__).endswith(".py"):
        pytest.skip("the pure-Python package (scripts/compiled runs the suite compiled)")
    for path in _listed():
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert not str(module.__file__).endswith(".py"), module.__file__
