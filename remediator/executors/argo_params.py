"""From a Decision to what is submitted: template, workflow name, labels and parameters.

The Argo half of the action table (`contract/actions.py`): which WorkflowTemplate
carries each action, which target parameters it takes and which extras it accepts.
Every value is validated here, before anything is sent; an unknown extra parameter is
refused rather than passed through.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from remediator.contract.decision import Decision
from remediator.executors import validate as v

LABEL_INCIDENT = "remediator.io/incident"
LABEL_ACTION = "remediator.io/action"
IMAGE_ENV = "REMEDIATOR_IMAGE"  # the service's own image; steps run exactly it

_NAME_MAX = 63  # the workflow name becomes a label value on its pods
_HASH_LEN = 10

Validator = Callable[[str, str], str]


def _pod(d: Decision) -> list[tuple[str, str]]:
    if d.uid is None:
        raise v.InvalidParameter("uid: delete-pod needs the pod UID (the precondition)")
    return [
        ("namespace", v.dns1123_label("namespace", d.namespace)),
        ("pod", v.dns1123_subdomain("pod", d.target)),
        ("uid", v.uid("uid", d.uid)),
        ("workload", _lock_key(d)),
        *([("phase", v.phase("phase", d.phase))] if d.phase else []),
    ]


def _hedge(d: Decision) -> list[tuple[str, str]]:
    parts = (d.workload or "").split("/")
    if len(parts) != 3 or parts[1] != "Deployment" or parts[0] != d.namespace:
        raise v.InvalidParameter(
            f"workload: hedge-pod needs the pod's Deployment, not {d.workload!r}"
        )
    pod = [(k, value) for k, value in _pod(d) if k != "phase"]
    return [*pod, ("deployment", v.dns1123_subdomain("deployment", parts[2]))]


def _daemonset(d: Decision) -> list[tuple[str, str]]:
    return [
        ("namespace", v.dns1123_label("namespace", d.namespace)),
        ("daemonset", v.dns1123_subdomain("daemonset", d.target)),
    ]


def _node(d: Decision) -> list[tuple[str, str]]:
    return [("node", v.dns1123_subdomain("node", d.target))]


def _fan_out(d: Decision) -> list[tuple[str, str]]:
    return []  # verify-gpu-memory fans out over every GPU node


_PROBE: dict[str, Validator] = {
    "samples": v.count,
    "interval": v.seconds,
    "max-spread-mib": v.count,
    "node-selector": v.label_selector,
}


@dataclass(frozen=True, slots=True)
class Workflow:
    """How Argo carries one action: the template, its target parameters, the extras it takes."""

    template: str
    targets: Callable[[Decision], list[tuple[str, str]]]
    extras: dict[str, Validator] = field(default_factory=dict)


# One entry per acting row of the action table; "notify" runs no workflow.
WORKFLOWS: dict[str, Workflow] = {
    "delete-pod": Workflow("delete-stuck-inference-pod", _pod),
    "restart-warmup": Workflow(
        "restart-gpu-warmup", _daemonset, {"image": v.image, "timeout": v.count, **_PROBE}
    ),
    "verify-gpu-memory": Workflow("verify-gpu-memory-stability", _fan_out, dict(_PROBE)),
    "cordon-node": Workflow("cordon-gpu-node", _node),
    "hedge-pod": Workflow("hedge-stalled-pod", _hedge, {"timeout": v.count}),
}


def workflow_for(decision: Decision) -> Workflow:
    found = WORKFLOWS.get(decision.action)
    if found is None:
        raise v.InvalidParameter(f"action {decision.action!r} runs no workflow")
    return found


def template_for(decision: Decision) -> str:
    return workflow_for(decision).template


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def workflow_name(decision: Decision) -> str:
    """Deterministic DNS-1123 name, `<action>-<incident slug>-<hash>`: the same
    incident and action always give the same name, so a re-submit is refused by
    Argo with 409 AlreadyExists. The hash keeps truncated slugs apart."""
    key = f"{template_for(decision)}\n{decision.incident}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:_HASH_LEN]
    room = _NAME_MAX - _HASH_LEN - 1
    stem = f"{decision.action}-{_slug(decision.incident)}"[:room].strip("-")
    return f"{stem}-{digest}"


def incident_label(incident: str) -> str:
    """The incident id itself when it is a valid label value, otherwise a slug
    with a hash suffix (still unique, still greppable)."""
    try:
        return v.label_value("incident", incident)
    except v.InvalidParameter:
        digest = hashlib.sha256(incident.encode()).hexdigest()[:_HASH_LEN]
        return f"{_slug(incident)[: 63 - _HASH_LEN - 1].strip('-')}-{digest}".lstrip("-")


def labels_for(decision: Decision) -> str:
    return f"{LABEL_INCIDENT}={incident_label(decision.incident)},{LABEL_ACTION}={decision.action}"


def _lock_key(decision: Decision) -> str:
    """`namespace.kind.name` of the owning workload: the mutex key in the template."""
    if decision.workload is None:
        return f"{decision.namespace}.pod.{decision.target}"
    parts = decision.workload.split("/")
    if len(parts) != 3:
        raise v.InvalidParameter(f"workload: {decision.workload!r} is not 'namespace/Kind/name'")
    ns, kind, name = parts
    v.dns1123_label("workload namespace", ns)
    v.dns1123_subdomain("workload name", name)
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,62}", kind) is None:
        raise v.InvalidParameter(f"workload: kind {kind!r} is not a Kubernetes kind")
    return f"{ns}.{kind.lower()}.{name}"


def remediator_image() -> str | None:
    """$REMEDIATOR_IMAGE, checked against the image grammar; None when unset (the
    templates' default `remediator-image` then applies)."""
    value = os.environ.get(IMAGE_ENV, "").strip()
    return v.image(IMAGE_ENV, value) if value else None


def parameters_for(decision: Decision) -> list[tuple[str, str]]:
    """Validated (name, value) pairs for the template's `spec.arguments`."""
    workflow = workflow_for(decision)
    extras = workflow.extras
    params = workflow.targets(decision)
    for key, value in decision.params:
        check = extras.get(key)
        if check is None:
            allowed = ", ".join(sorted(extras)) or "none"
            raise v.InvalidParameter(
                f"param {key!r} is not accepted by {decision.action} (accepted: {allowed})"
            )
        params.append((key, check(key, value)))
    params.append(("incident", v.incident("incident", decision.incident)))
    params.append(("reason", v.reason("reason", v.plain_text(decision.reason))))
    image = remediator_image()
    if image is not None:
        params.append(("remediator-image", image))
    return params
