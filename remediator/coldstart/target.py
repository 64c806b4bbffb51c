"""What the user named on the command line → which pods to list. Pure: no API calls here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# kubectl's spellings of the kinds a target may name.
_KINDS = {
    "pod": "pod",
    "pods": "pod",
    "po": "pod",
    "deploy": "deployment",
    "deployment": "deployment",
    "deployments": "deployment",
    "deployment.apps": "deployment",
    "sts": "statefulset",
    "statefulset": "statefulset",
    "statefulsets": "statefulset",
    "statefulset.apps": "statefulset",
}
SHORT = {"deployment": "deploy", "statefulset": "sts", "pod": "pod"}


class TargetError(ValueError):
    """A target the command cannot use (said to the user as a usage error)."""


@dataclass(frozen=True, slots=True)
class Target:
    """`kind` is pod, deployment or statefulset, with `name`; or None: every pod matching
    `selector` (None: every pod of the namespace)."""

    kind: str | None = None
    name: str | None = None
    selector: str | None = None

    @property
    def label(self) -> str:
        if self.kind is not None:
            return f"{SHORT[self.kind]}/{self.name}"
        return f"-l {self.selector}" if self.selector else "all pods"


def parse_target(text: str | None, selector: str | None) -> Target:
    """`POD`, `KIND/NAME` (pod, deploy, sts in kubectl's spellings), or `-l SELECTOR`."""
    if text and selector:
        raise TargetError("name a pod or workload, or give -l SELECTOR, not both")
    if selector is not None:
        if not selector.strip():
            raise TargetError("-l needs a label selector, e.g. -l app=vllm")
        return Target(selector=selector)
    if not text:
        return Target()
    kind_text, slash, name = text.partition("/")
    if not slash:
        return Target("pod", text)
    kind = _KINDS.get(kind_text.lower())
    if kind is None:
        raise TargetError(
            f"cannot show {kind_text!r}: name a pod, deploy/NAME or sts/NAME (or use -l SELECTOR)"
        )
    if not name or "/" in name:
        raise TargetError(f"{text!r}: expected {kind_text}/NAME")
    return Target(kind, name)


def selector_of(workload: dict[str, Any]) -> str:
    """A Deployment's or StatefulSet's `spec.selector` as a label-selector string."""
    sel = (workload.get("spec") or {}).get("selector") or {}
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
        else:
            raise TargetError(f"selector operator {op!r} is not one Kubernetes defines")
    if not parts:
        raise TargetError("the workload's selector is empty: it would select every pod")
    return ",".join(parts)
