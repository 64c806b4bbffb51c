"""Kubernetes label selectors (the string form `kubectl -l` takes), parsed and matched.

Supports equality (`a=b`, `a==b`, `a!=b`), set (`a in (x,y)`, `a notin (x)`) and
existence (`a`, `!a`) requirements, comma-separated, all of which must hold.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQ = re.compile(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(\S*)\s*$")


class SelectorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    op: str  # "in" | "notin" | "exists" | "!exists"
    values: frozenset[str]

    def matches(self, labels: Mapping[str, Any]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        present = self.key in labels and str(labels[self.key]) in self.values
        return present if self.op == "in" else not present


@dataclass(frozen=True, slots=True)
class Selector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


def parse_selector(text: str) -> Selector:
    if not isinstance(text, str):
        raise SelectorError(f"a label selector is a string, got {type(text).__name__}")
    return Selector(text, tuple(_requirement(part) for part in _split(text) if part.strip()))


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            raise SelectorError(f"unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"unbalanced '(' in {text!r}")
    parts.append(text[start:])
    return parts


def _requirement(part: str) -> Requirement:
    m = _SET.match(part)
    if m:
        key, op, raw = m.group(1), m.group(2), m.group(3)
        values = [v.strip() for v in raw.split(",")]
        return Requirement(_key(key), op, frozenset(_value(v) for v in values))
    m = _EQ.match(part)
    if m:
        key, op, value = m.group(1), m.group(2), m.group(3)
        return Requirement(_key(key), "notin" if op == "!=" else "in", frozenset({_value(value)}))
    bare = part.strip()
    if bare.startswith("!"):
        return Requirement(_key(bare[1:].strip()), "!exists", frozenset())
    return Requirement(_key(bare), "exists", frozenset())


def _key(key: str) -> str:
    name = key.rsplit("/", 1)[-1]
    if not _KEY.match(key) or len(name) > 63 or len(key) > 253 + 1 + 63:
        raise SelectorError(f"invalid label key {key!r}")
    return key


def _value(value: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorError(f"invalid label value {value!r}")
    return value
