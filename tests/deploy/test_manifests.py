"""Every manifest parses, every overlay renders, every kind validates offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.data import CAPTURES
from tests.deploy import support as s

# YAML files under deploy/ and sensors/ that are not Kubernetes objects, and who checks them.
NOT_MANIFESTS = {
    "deploy/base/policy.yaml": "remediator policy (ConfigMap data; test_workloads.py)",
    "deploy/overlays/dry-run/policy.yaml": "remediator policy (ConfigMap data; test_workloads.py)",
    "deploy/components/act/argo-token-env.yaml": "JSON 6902 patch (rendered by the overlays)",
    "deploy/monitoring/alertmanager/alertmanager.yaml": "amtool check-config",
    "deploy/monitoring/prometheus/remediator.rules.yaml": "promtool check rules",
    "deploy/monitoring/prometheus/remediator.rules.test.yaml": "promtool test rules",
    "deploy/krew/coldstart.yaml": "krew plugin manifest (tests/coldstart/test_krew.py)",
}


def _rel(p: Path) -> str:
    return str(p.relative_to(s.REPO))


@pytest.mark.parametrize("path", s.yaml_files(), ids=_rel)
def test_every_yaml_file_parses_and_is_accounted_for(path: Path) -> None:
    docs = s.load_docs(path)
    assert docs, f"{_rel(path)} is empty"
    if _rel(path) in NOT_MANIFESTS or path.name == "kustomization.yaml":
        return
    for doc in docs:
        assert isinstance(doc, dict) and {"apiVersion", "kind", "metadata"} <= doc.keys(), (
            f"{_rel(path)}: not a Kubernetes object and not listed in NOT_MANIFESTS"
        )


def test_every_manifest_file_is_reachable_from_a_kustomization() -> None:
    """A manifest no kustomization lists would never be applied, nor validated."""
    listed: set[Path] = set()
    for k in [*s.DEPLOY.rglob("kustomization.yaml"), *s.SENSORS.rglob("kustomization.yaml")]:
        spec = s.load_docs(k)[0]
        for entry in spec.get("resources", []) + [p["path"] for p in spec.get("patches", [])]:
            listed.add((k.parent / entry).resolve())
        for gen in spec.get("configMapGenerator", []):
            listed.update((k.parent / f).resolve() for f in gen.get("files", []))
    orphans = [
        _rel(p)
        for p in s.yaml_files()
        if p.name != "kustomization.yaml"
        and _rel(p) not in NOT_MANIFESTS
        and p.resolve() not in listed
    ]
    assert not orphans, f"not referenced by any kustomization: {orphans}"


def test_grafana_dashboard_is_json() -> None:
    dash = json.loads((s.DEPLOY / "monitoring/grafana/remediator-cold-start.json").read_text())
    assert dash["uid"] and dash["panels"]


@pytest.mark.parametrize("directory", s.kustomization_dirs(), ids=_rel)
def test_kustomization_renders(directory: Path) -> None:
    docs = s.render(directory)
    assert docs, f"{_rel(directory)} rendered nothing"
    ids = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]
    assert len(ids) == len(set(ids)), "duplicate objects"


def _rendered_ids() -> list[tuple[str, dict[str, object]]]:
    return list(s.all_rendered())


def _doc_id(item: tuple[str, dict[str, object]]) -> str:
    where, doc = item
    meta = doc["metadata"]
    assert isinstance(meta, dict)
    return f"{where}:{doc['kind']}/{meta.get('namespace', '')}/{meta['name']}"


@pytest.mark.parametrize("item", _rendered_ids(), ids=_doc_id)
def test_rendered_object_validates(item: tuple[str, dict[str, object]]) -> None:
    """Kubernetes kinds with kubernetes-validate (strict), Argo kinds with the published schemas
    in tests/data (plus a check for fields they do not define), Prometheus Operator kinds by
    their own tests (test_monitoring.py). Anything else has no validator and fails."""
    _, doc = item
    api = str(doc["apiVersion"])
    if api.startswith("argoproj.io/"):
        errors = s.validate_argo(doc) + [f"unknown field {f}" for f in s.argo_unknown_fields(doc)]
        assert not errors, errors
    elif api.startswith("monitoring.coreos.com/"):
        assert doc["kind"] in ("PrometheusRule", "ServiceMonitor"), (
            f"no validator for {doc['kind']}"
        )
    else:
        s.validate_k8s(doc)


def test_every_component_is_rendered_somewhere() -> None:
    """Components render inside an overlay: the production overlay holds both."""
    docs = s.render(s.DEPLOY / "overlays" / "production")
    for doc in docs:
        s.validate_k8s(doc)
    s.find(docs, "ClusterRole", "remediator-workflow-cordon-nodes")
    s.find(docs, "Role", "remediator-submit-workflows", "argo")


# --- the validators themselves can fail ---------------------------------------------------


def test_k8s_validator_rejects_an_unknown_field() -> None:
    doc = yaml.safe_load((s.DEPLOY / "base" / "service.yaml").read_text())
    doc["spec"]["portz"] = []
    with pytest.raises(AssertionError, match="portz"):
        s.validate_k8s(doc)


def test_k8s_validator_rejects_a_kind_it_has_no_schema_for() -> None:
    with pytest.raises(AssertionError, match="Couldn't find schema"):
        s.validate_k8s({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"}})


def test_argo_validator_catches_a_type_error_and_a_typo() -> None:
    sensor = s.load_docs(s.SENSORS / "sensor-alertmanager-to-remediator.yaml")[0]
    sensor["spec"]["triggers"][0]["retryStrategy"]["steps"] = "three"
    sensor["spec"]["triggers"][0]["template"]["http"]["metod"] = "POST"
    assert any("steps" in e for e in s.validate_argo(sensor))
    assert "spec.triggers.0.template.http.metod" in s.argo_unknown_fields(sensor)


def test_schema_relaxation_is_exactly_the_two_documented_places() -> None:
    for path in (s.EVENTS_SCHEMA, s.WORKFLOWS_SCHEMA):
        raw = json.loads(path.read_text())
        relaxed = s.relax(raw)
        changed = sorted(
            k for k in raw["definitions"] if raw["definitions"][k] != relaxed["definitions"][k]
        )
        assert set(changed) <= {s.INT_OR_STRING, *s.WEBHOOK_DEFS}, changed
        assert {k: v for k, v in raw.items() if k != "definitions"} == {
            k: v for k, v in relaxed.items() if k != "definitions"
        }


def test_upstream_examples_validate_with_the_relaxed_schemas() -> None:
    """The relaxations are needed and sufficient for the upstream Argo Events examples."""
    for path in sorted((CAPTURES / "argo-events-examples").iterdir()):
        for doc in s.load_docs(path):
            assert not s.validate_argo(doc), path.name
