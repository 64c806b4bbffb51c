"""Errors a policy or guardrail configuration raises, named by where the fault is."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad policy file. `path` is the dotted key ("guardrails.cooldown.seconds");
    the loader maps it to a file line when it has one."""

    def __init__(self, path: str, message: str, line: int | None = None) -> None:
        self.path = path
        self.message = message
        self.line = line
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{path}: {message}")
