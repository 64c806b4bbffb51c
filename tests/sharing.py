"""Tests share nothing mutable: fresh builders, and a watch on module-level data.

Two tools, both for the same defect: a test that changes data another test reads, so that a
later test fails (or passes) because of what ran before it, in some orders and some seeds only.

- `fresh`: a builder's result is deep-copied, so it shares no list or dict with the builder's
  module constants, its arguments or its earlier results. A test may then change what it built
  (hypothesis tests replace fields anywhere in a document) without touching the next build.
- `GlobalsWatch`: the conftest fingerprints every mutable module-level value (list, dict, set,
  bytearray, a dataclass that is not frozen) of the modules in tests/ after collection
  and again after each test's teardown; a value that changed fails that test's teardown with
  the module, the name and what it became. A mutation no longer waits for the unlucky order
  to show: the test that made it goes red, every run it makes it. The same holds for the data
  a module- or session-scoped fixture hands to several tests (`shared_fixture_values`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_CONTAINERS = (list, dict, set, bytearray)


def fresh(builder: Callable[P, T]) -> Callable[P, T]:
    """`builder`, returning a deep copy: nothing in it is shared with anything else, and no
    two places in it are one list or dict (changing one never changes the other)."""

    @functools.wraps(builder)
    def build(*args: P.args, **kwargs: P.kwargs) -> T:
        return own_copy(builder(*args, **kwargs))

    return build


def own_copy(value: T) -> T:
    """A deep copy of JSON-like data in which every list and dict is new, even where the
    original held one twice (`copy.deepcopy` keeps such sharing)."""
    if type(value) is dict:
        return {k: own_copy(v) for k, v in value.items()}  # type: ignore[return-value]
    if type(value) is list:
        return [own_copy(v) for v in value]  # type: ignore[return-value]
    if type(value) is tuple:
        return tuple(own_copy(v) for v in value)  # type: ignore[return-value]
    if isinstance(value, str | bytes | int | float | bool | None):
        return value
    return copy.deepcopy(value)


def _watched(value: object) -> bool:
    if type(value) in _CONTAINERS:
        return True
    is_record = dataclasses.is_dataclass(value) and not isinstance(value, type)
    return is_record and not type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]


def _fingerprint(value: object) -> bytes:
    return hashlib.blake2b(repr(value).encode(errors="replace"), digest_size=16).digest()


def _shown(value: object, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


class GlobalsWatch:
    """Fingerprints of the mutable module-level values of the modules whose files are under
    `root` (the suite's folder)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve()) + os.sep
        self.known: dict[tuple[str, str], tuple[int, bytes]] = {}

    def _values(self) -> Iterator[tuple[tuple[str, str], object]]:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if not isinstance(path, str) or not path.startswith(self.root):
                continue
            for attr, value in list(vars(module).items()):
                if not attr.startswith("__") and _watched(value):
                    yield (name, attr), value

    def check(self) -> list[str]:
        """What changed in place since the last check (each named once); learns new values."""
        changed = []
        for key, value in self._values():
            seen = (id(value), _fingerprint(value))
            before = self.known.get(key)
            if before is not None and before[0] == seen[0] and before[1] != seen[1]:
                changed.append(f"{key[0]}.{key[1]} changed in place; now {_shown(value)}")
            self.known[key] = seen
        return changed


def shared_fixture_values(item: Any) -> dict[str, object]:
    """The values of the data fixtures (lists, dicts, sets, tuples) this test gets from a
    module, package or session scope: other tests read the same objects."""
    out: dict[str, object] = {}
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name, value in getattr(item, "funcargs", {}).items():
        chain = defs.get(name)
        if chain and chain[-1].scope != "function" and type(value) in (*_CONTAINERS, tuple):
            out[name] = value
    return out


def fingerprints(values: dict[str, object]) -> dict[str, bytes]:
    return {name: _fingerprint(value) for name, value in values.items()}


def changed_fixtures(values: dict[str, object], before: dict[str, bytes]) -> list[str]:
    return [
        f"fixture {name!r} (shared beyond this test) changed in place; now {_shown(value)}"
        for name, value in values.items()
        if _fingerprint(value) != before[name]
    ]
