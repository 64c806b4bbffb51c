"""The policy file: the rules (`policy`) and the guardrails (`guard`), parsed strictly,
with the line of every fault.

    stuck_pod:, image_update:, gpu_memory:, alerts:   # remediator/policy/config.py
    guardrails:                                       # remediator/guard, docs/guardrails.md

The two halves are parsed by their own layers, which know nothing of each other; this
module sits above both. Everything has a default; an empty file (or none) is the
default policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from remediator.contract.errors import ConfigError
from remediator.guard import GuardConfig, parse_guardrails
from remediator.guard.dry_run import DryRun, DryRunConfig
from remediator.policy.config import SECTIONS, PolicyConfig, parse_policy

GUARDRAILS = "guardrails"


@dataclass(frozen=True, slots=True)
class PolicyFile:
    rules: PolicyConfig = field(default_factory=PolicyConfig)
    guardrails: GuardConfig = field(default_factory=GuardConfig)

    @property
    def dry_run(self) -> bool:
        return self.guardrails.of(DryRun.name, DryRunConfig).enabled

    def with_dry_run(self) -> PolicyFile:
        """Dry run on, whatever the file says (a flag can only add safety)."""
        return replace(self, guardrails=self.guardrails.with_stage(DryRun.name, DryRunConfig(True)))


def parse_policy_file(doc: Any) -> PolicyFile:
    if doc is None:
        return PolicyFile()
    if not isinstance(doc, Mapping):
        raise ConfigError("policy", f"expected a mapping, got {type(doc).__name__}")
    rules = {k: v for k, v in doc.items() if k != GUARDRAILS}
    known = ", ".join((*SECTIONS, GUARDRAILS))
    return PolicyFile(parse_policy(rules, known), parse_guardrails(doc.get(GUARDRAILS)))


def load_policy(text: str, source: str = "policy") -> PolicyFile:
    """Parse YAML text; a ConfigError carries the line of the offending key."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(source, f"not valid YAML: {getattr(exc, 'problem', exc)}", line) from None
    try:
        return parse_policy_file(doc)
    except ConfigError as exc:
        raise ConfigError(exc.path, exc.message, _line_of(node, exc.path)) from None


def load_policy_file(path: str | Path) -> PolicyFile:
    return load_policy(Path(path).read_text(encoding="utf-8"), str(path))


def _line_of(node: Any, path: str) -> int | None:
    """The 1-based line of a dotted path in a composed YAML tree (its deepest known key)."""
    line = None
    for part in path.replace("[", ".[").split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        for key, value in node.value:
            if key.value == part:
                line, node = key.start_mark.line + 1, value
                break
        else:
            break
    return line
