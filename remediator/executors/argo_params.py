"""From a Decision to what is submitted: workflow name, labels and parameters.

Every value is validated here, before anything is sent; an unknown extra
parameter is refused rather than passed through.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable

from remediator.executors import validate as v
from remediator.policy.decision import TEMPLATE_FOR_ACTION, Decision

LABEL_INCIDENT = "remediator.io/incident"
LABEL_ACTION = "remediator.io/action"
IMAGE_ENV = "REMEDIATOR_IMAGE"  # the service's own image; steps run exactly it

_NAME_MAX = 63  # the workflow name becomes a label value on its pods
_HASH_LEN = 10

Validator = Callable[[str, str], str]

# Extra parameters a decision may carry, per action, and how each is checked.
_EXTRAS: dict[str, dict[str, Validator]] = {
    "delete-pod": {},
    "restart-warmup": {
        "image": v.image,
        "timeout": v.count,
        "samples": v.count,
        "interval": v.seconds,
        "max-spread-mib": v.count,
        "node-selector": v.label_selector,
    },
    "verify-gpu-memory": {
        "samples": v.count,
        "interval": v.seconds,
        "max-spread-mib": v.count,
        "node-selector": v.label_selector,
    },
    "cordon-node": {},
}


def template_for(decision: Decision) -> str:
    template = TEMPLATE_FOR_ACTION.get(decision.action)
    if template is None:
        raise v.InvalidParameter(f"action {decision.action!r} runs no workflow")
    return template


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


def _targets(decision: Decision) -> list[tuple[str, str]]:
    if decision.action == "delete-pod":
        if decision.uid is None:
            raise v.InvalidParameter("uid: delete-pod needs the pod UID (the precondition)")
        return [
            ("namespace", v.dns1123_label("namespace", decision.namespace)),
            ("pod", v.dns1123_subdomain("pod", decision.target)),
            ("uid", v.uid("uid", decision.uid)),
            ("workload", _lock_key(decision)),
        ]
    if decision.action == "restart-warmup":
        return [
            ("namespace", v.dns1123_label("namespace", decision.namespace)),
            ("daemonset", v.dns1123_subdomain("daemonset", decision.target)),
        ]
    if decision.action == "cordon-node":
        return [("node", v.dns1123_subdomain("node", decision.target))]
    return []  # verify-gpu-memory fans out over every GPU node


def remediator_image() -> str | None:
    """$REMEDIATOR_IMAGE, checked against the image grammar; None when unset (the
    templates' default `remediator-image` then applies)."""
    value = os.environ.get(IMAGE_ENV, "").strip()
    return v.image(IMAGE_ENV, value) if value else None


def parameters_for(decision: Decision) -> list[tuple[str, str]]:
    """Validated (name, value) pairs for the template's `spec.arguments`."""
    template_for(decision)
    extras = _EXTRAS[decision.action]
    params = _targets(decision)
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
