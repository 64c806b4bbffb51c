"""Shared helpers for the deploy/ and sensors/ checks: paths, tools, rendering, validators."""

from __future__ import annotations

import copy
import functools
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.data import SCHEMAS
from tests.sharing import own_copy

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SENSORS = REPO / "sensors"
K8S_VERSION = "1.32.0"  # matches kubectl v1.32 here; kubernetes-validate ships it

# Where each tool comes from on Debian (CI must install all three).
TOOL_PACKAGES = {
    "kubectl": "package kubectl from the pkgs.k8s.io apt repository, v1.32 (kustomize v5)",
    "promtool": "Debian package prometheus",
    "amtool": "Debian package prometheus-alertmanager",
}

# Kustomize kinds that are not rendered on their own: components only inside an overlay.
KUSTOMIZE_KINDS = {"Kustomization", "Component"}


def tool(name: str) -> str:
    """The tool's path, or a failed test that says what to install (never a silent skip)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: install it ({TOOL_PACKAGES.get(name, name)}); "
            "scripts/test must do this in CI",
            pytrace=False,
        )
    return path


def run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


HELM = DEPLOY / "helm"  # Go templates, not YAML: helm lint and tests/deploy/test_helm.py


def yaml_files() -> list[Path]:
    found = [*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml"), *SENSORS.rglob("*.yaml")]
    return sorted(p for p in set(found) if not p.is_relative_to(HELM))


def load_docs(path: Path) -> list[Any]:
    with path.open() as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def kustomization_dirs() -> list[Path]:
    """Every folder whose kustomization.yaml is a Kustomization (components never render alone)."""
    dirs = []
    for k in sorted([*DEPLOY.rglob("kustomization.yaml"), *SENSORS.rglob("kustomization.yaml")]):
        if load_docs(k)[0].get("kind", "Kustomization") == "Kustomization":
            dirs.append(k.parent)
    return dirs


def render(directory: Path) -> tuple[dict[str, Any], ...]:
    """What `kubectl kustomize DIRECTORY` renders (run once per folder): a fresh copy, which
    the caller may change."""
    return own_copy(_render(directory))


@functools.cache
def _render(directory: Path) -> tuple[dict[str, Any], ...]:
    out = run([tool("kubectl"), "kustomize", str(directory)])
    if out.returncode != 0:
        pytest.fail(f"kubectl kustomize {directory.relative_to(REPO)} failed:\n{out.stderr}")
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def all_rendered() -> Iterator[tuple[str, dict[str, Any]]]:
    for d in kustomization_dirs():
        for doc in render(d):
            yield str(d.relative_to(REPO)), doc


def find(docs: Any, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    hits = [
        d
        for d in docs
        if d["kind"] == kind
        and d["metadata"]["name"] == name
        and (namespace is None or d["metadata"].get("namespace") == namespace)
    ]
    assert len(hits) == 1, f"expected one {kind} {namespace}/{name}, found {len(hits)}"
    found: dict[str, Any] = hits[0]
    return found


# --- Kubernetes kinds -------------------------------------------------------------------


def validate_k8s(doc: dict[str, Any]) -> None:
    """kubernetes-validate in strict mode (unknown fields are errors); a kind without a
    schema is an error too, never a warning."""
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError as e:
        raise AssertionError(e.message) from None
    except kubernetes_validate.ValidationError as e:
        where = ".".join(str(p) for p in e.path)
        raise AssertionError(
            f"{doc['kind']}/{doc['metadata']['name']}: {where}: {e.message}"
        ) from None


# --- Argo kinds -------------------------------------------------------------------------

EVENTS_SCHEMA = SCHEMAS / "argo-events-schema.json"
WORKFLOWS_SCHEMA = SCHEMAS / "argo-workflows-schema.json"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
WEBHOOK_DEFS = (
    "io.argoproj.events.v1alpha1.WebhookContext",
    "io.argoproj.events.v1alpha1.WebhookEventSource",
)


def relax(schema: dict[str, Any]) -> dict[str, Any]:
    """The two documented relaxations (tests/data/README.md), nothing else: IntOrString accepts
    integers, and the webhook `url` is optional (the controller does not require it)."""
    out = copy.deepcopy(schema)
    defs = out["definitions"]
    if INT_OR_STRING in defs:
        defs[INT_OR_STRING]["type"] = ["integer", "string"]
    for name in WEBHOOK_DEFS:
        if name in defs and "url" in defs[name].get("required", []):
            defs[name]["required"] = [r for r in defs[name]["required"] if r != "url"]
    return out


@functools.cache
def argo_validator(kind: str) -> jsonschema.protocols.Validator:
    events = kind in ("EventSource", "Sensor", "EventBus")
    path = EVENTS_SCHEMA if events else WORKFLOWS_SCHEMA
    schema = relax(json.loads(path.read_text()))
    prefix = "io.argoproj.events.v1alpha1." if events else "io.argoproj.workflow.v1alpha1."
    if prefix + kind not in schema["definitions"]:
        raise AssertionError(f"no Argo schema for kind {kind}")
    schema = {**schema, "oneOf": None, "$ref": f"#/definitions/{prefix}{kind}"}
    del schema["oneOf"]
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def validate_argo(doc: dict[str, Any]) -> list[str]:
    v = argo_validator(doc["kind"])
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def unknown_fields(
    doc: Any, schema: dict[str, Any], node: dict[str, Any], path: str = ""
) -> list[str]:
    """Keys the schema does not define (the Argo schemas allow any, so a typo would pass)."""
    while "$ref" in node:
        node = schema["definitions"][node["$ref"].split("/")[-1]]
    found: list[str] = []
    if isinstance(doc, dict) and "properties" in node:
        for key, value in doc.items():
            if key not in node["properties"]:
                found.append(f"{path}.{key}".lstrip("."))
            else:
                found += unknown_fields(value, schema, node["properties"][key], f"{path}.{key}")
    elif isinstance(doc, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, value in doc.items():
            found += unknown_fields(value, schema, node["additionalProperties"], f"{path}.{key}")
    elif isinstance(doc, list) and isinstance(node.get("items"), dict):
        for i, value in enumerate(doc):
            found += unknown_fields(value, schema, node["items"], f"{path}.{i}")
    return found


def argo_unknown_fields(doc: dict[str, Any]) -> list[str]:
    v = argo_validator(doc["kind"])
    return unknown_fields(doc, v.schema, v.schema)
