"""Least privilege, read from the RENDERED output (what an SRE applies), not the sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from remediator.executors.argo_params import WORKFLOWS
from tests.deploy import support as s

VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}
TEMPLATES = {w.template for w in WORKFLOWS.values()}  # what the executor submits
SERVICE_ACCOUNTS = {
    ("remediator", "remediator"),
    ("argo", "remediator-workflow"),
    ("argo-events", "remediator-eventsource"),
    ("argo-events", "remediator-sensor-submit"),
}


class Allowed:
    def __init__(
        self,
        verbs: set[str],
        names: set[str] | None = None,
        cluster: bool = False,
        namespaces: set[str] | None = None,
    ) -> None:
        self.verbs, self.names, self.cluster, self.namespaces = verbs, names, cluster, namespaces


INFERENCE = {"llm-inference"}
# (apiGroup, resource) -> what may be granted on it. Anything not here is refused.
ALLOWED: dict[tuple[str, str], Allowed] = {
    ("coordination.k8s.io", "leases"): Allowed({"get", "update"}, {"remediator-leader"}),
    # the state the replicas share (deploy/base/state.yaml)
    ("", "configmaps"): Allowed({"get", "patch"}, {"remediator-state"}, namespaces={"remediator"}),
    ("apps", "daemonsets"): Allowed(
        {"get", "list", "watch", "patch"}, {"gpu-warmup"}, namespaces={"kube-system"}
    ),
    ("", "pods"): Allowed(
        {"get", "list", "watch", "delete"}, namespaces=INFERENCE | {"kube-system"}
    ),
    ("", "pods/log"): Allowed({"get"}, namespaces=INFERENCE),  # engine-init steps
    ("", "events"): Allowed({"get", "list", "watch"}, namespaces=INFERENCE),
    ("events.k8s.io", "events"): Allowed({"get", "list", "watch"}, namespaces=INFERENCE),
    # patch: hedge-pod surges a Deployment by one and back (the workflow's Role)
    ("apps", "deployments"): Allowed({"get", "list", "watch", "patch"}, namespaces=INFERENCE),
    ("apps", "statefulsets"): Allowed({"get", "list", "watch"}, namespaces=INFERENCE),
    ("argoproj.io", "workflows"): Allowed({"create", "get", "list", "watch"}, namespaces={"argo"}),
    ("argoproj.io", "workflowtemplates"): Allowed({"get"}, TEMPLATES, namespaces={"argo"}),
    ("argoproj.io", "workflowtaskresults"): Allowed({"create", "patch"}, namespaces={"argo"}),
    ("", "nodes"): Allowed({"get", "list", "patch"}, cluster=True),
}


def rbac_violations(docs: list[dict[str, Any]], inference: set[str] = INFERENCE) -> list[str]:
    """What in `docs` grants more than ALLOWED; `inference`: the inference namespaces (the Helm
    chart may list several), standing in for llm-inference wherever ALLOWED names it."""
    out: list[str] = []
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    for (kind, ns, name), role in roles.items():
        who = f"{kind} {ns or ''}/{name}"
        if role.get("aggregationRule"):
            out.append(f"{who}: aggregationRule")
        for rule in role.get("rules") or []:
            out += _rule_violations(who, kind == "ClusterRole", ns, rule, inference)
    for d in docs:
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            out += _binding_violations(d, roles)
    return out


def _rule_violations(
    who: str, cluster: bool, ns: str | None, rule: dict[str, Any], inference: set[str]
) -> list[str]:
    out = []
    if rule.get("nonResourceURLs"):
        return [f"{who}: nonResourceURLs {rule['nonResourceURLs']}"]
    fields = [rule.get(k) or [] for k in ("apiGroups", "resources", "verbs", "resourceNames")]
    if any("*" in v for f in fields for v in f):
        return [f"{who}: wildcard in {rule}"]
    for verb in set(rule.get("verbs") or []) - VERBS:
        out.append(f"{who}: verb {verb!r} is not allowed")
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            allowed = ALLOWED.get((group, resource))
            if allowed is None:
                out.append(f"{who}: no access allowed to {group or 'core'}/{resource}")
                continue
            extra = set(rule["verbs"]) - allowed.verbs
            if extra:
                out.append(f"{who}: {sorted(extra)} on {group or 'core'}/{resource}")
            if allowed.names is not None and not (
                rule.get("resourceNames") and set(rule["resourceNames"]) <= allowed.names
            ):
                out.append(
                    f"{who}: {resource} must be limited to resourceNames in {sorted(allowed.names)}"
                )
            if cluster and not allowed.cluster:
                out.append(f"{who}: {resource} may only be granted in a namespaced Role")
            where = allowed.namespaces
            if where is not None and where >= INFERENCE:
                where = (where - INFERENCE) | inference
            if where is not None and not cluster and ns not in where:
                out.append(f"{who}: {resource} may not be granted in namespace {ns}")
            if resource == "pods" and "delete" in rule["verbs"] and ns not in inference:
                out.append(f"{who}: pod deletion outside the inference namespaces")
    return out


def _binding_violations(b: dict[str, Any], roles: dict[tuple[str, Any, str], Any]) -> list[str]:
    who = f"{b['kind']} {b['metadata'].get('namespace', '')}/{b['metadata']['name']}"
    out = []
    ref = b["roleRef"]
    ns = None if ref["kind"] == "ClusterRole" else b["metadata"].get("namespace")
    if (ref["kind"], ns, ref["name"]) not in roles:
        out.append(f"{who}: roleRef {ref['kind']} {ref['name']} is not part of this output")
    for subj in b.get("subjects") or []:
        if subj["kind"] != "ServiceAccount":
            out.append(f"{who}: binds {subj['kind']} {subj['name']}")
        elif (subj.get("namespace"), subj["name"]) not in SERVICE_ACCOUNTS:
            out.append(
                f"{who}: binds unknown ServiceAccount {subj.get('namespace')}/{subj['name']}"
            )
    return out


def _rendered(directory: Path) -> list[dict[str, Any]]:
    return list(s.render(directory))


# Namespace-less bases: overlays include them once per inference namespace.
PARTIALS = {s.DEPLOY / "rbac" / "inference-observe", s.DEPLOY / "rbac" / "inference-act"}
APPLIED = [d for d in s.kustomization_dirs() if d not in PARTIALS]


@pytest.mark.parametrize("directory", APPLIED, ids=lambda p: str(p.relative_to(s.REPO)))
def test_rendered_rbac_is_least_privilege(directory: Path) -> None:
    assert rbac_violations(_rendered(directory)) == []


def test_namespace_less_rbac_is_only_used_under_a_namespace() -> None:
    for partial in PARTIALS:
        users = [
            k
            for k in s.DEPLOY.rglob("kustomization.yaml")
            if any(
                (k.parent / r).resolve() == partial for r in s.load_docs(k)[0].get("resources", [])
            )
        ]
        assert users, f"{partial} is not used by any overlay"
        for k in users:
            assert s.load_docs(k)[0].get("namespace") in INFERENCE, (
                f"{k} must set an inference namespace"
            )


def test_cordon_component_is_least_privilege() -> None:
    docs = list(s.render(s.DEPLOY / "overlays" / "production"))
    assert rbac_violations(docs) == []
    cordon = s.find(docs, "ClusterRole", "remediator-workflow-cordon-nodes")
    assert cordon["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}
    ]


def grants(docs: list[dict[str, Any]]) -> set[tuple[str | None, str, str, str]]:
    """(namespace, API group, resource, verb) of every rule of the Roles and ClusterRoles."""
    return {
        (d["metadata"].get("namespace"), group, resource, verb)
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
        for rule in d["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_dry_run_cannot_act_even_if_its_flag_is_ignored() -> None:
    docs = _rendered(s.DEPLOY / "overlays" / "dry-run")
    writes = {g for g in grants(docs) if g[3] in {"create", "update", "patch", "delete"}}
    assert writes == {
        ("remediator", "coordination.k8s.io", "leases", "update"),
        ("remediator", "", "configmaps", "patch"),  # the shared state, not an act
    }
    settings = next(d for d in docs if d["metadata"]["name"].startswith("remediator-settings"))
    assert settings["data"]["REMEDIATOR_DRY_RUN"] == "true"
    deployment = s.find(docs, "Deployment", "remediator")
    env = {e["name"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "ARGO_TOKEN" not in env


def test_production_grants_what_the_workflows_need() -> None:
    have = grants(_rendered(s.DEPLOY / "overlays" / "production"))
    needed = {
        ("llm-inference", "", "pods", "delete"),
        ("kube-system", "apps", "daemonsets", "patch"),
        ("kube-system", "", "pods", "list"),
        ("argo", "argoproj.io", "workflowtaskresults", "create"),
        ("argo", "argoproj.io", "workflowtaskresults", "patch"),
        ("argo", "argoproj.io", "workflows", "create"),
        ("argo", "argoproj.io", "workflowtemplates", "get"),
        (None, "", "nodes", "list"),
        ("remediator", "coordination.k8s.io", "leases", "update"),
        ("remediator", "", "configmaps", "patch"),  # the shared state
        ("llm-inference", "", "pods/log", "get"),  # engine_logs.follow
        ("llm-inference", "apps", "deployments", "patch"),  # hedge-pod
        ("llm-inference", "", "pods", "list"),  # hedge-pod: which pod is new, which Ready
    }
    assert needed <= have, needed - have


def submittable(docs: list[dict[str, Any]]) -> set[str]:
    """The WorkflowTemplates the remediator's submit Role lets it read (and so submit from)."""
    return {
        name
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == "remediator-submit-workflows"
        for rule in d["rules"]
        if "workflowtemplates" in rule["resources"]
        for name in rule.get("resourceNames") or []
    }


def test_the_submit_role_names_every_template_the_executor_submits() -> None:
    """A new action's template must be granted, or serve's submit is refused at run time."""
    assert submittable(_rendered(s.DEPLOY / "overlays" / "production")) == TEMPLATES


def test_pod_logs_are_read_only_in_the_inference_namespaces() -> None:
    have = grants(_rendered(s.DEPLOY / "overlays" / "production"))
    logs = {(ns, verb) for ns, group, res, verb in have if res == "pods/log"}
    assert logs == {("llm-inference", "get")}


def test_workflow_serviceaccount_is_the_one_the_templates_use() -> None:
    docs = _rendered(s.DEPLOY / "overlays" / "production")
    s.find(docs, "ServiceAccount", "remediator-workflow", "argo")


# --- the checker itself can fail -----------------------------------------------------------


def _role(rules: list[dict[str, Any]], ns: str | None = "llm-inference") -> dict[str, Any]:
    kind = "Role" if ns else "ClusterRole"
    meta = {"name": "r", **({"namespace": ns} if ns else {})}
    return {"kind": kind, "metadata": meta, "rules": rules}


@pytest.mark.parametrize(
    ("rules", "ns", "expect"),
    [
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}], "llm-inference", "wildcard"),
        (
            [{"apiGroups": ["*"], "resources": ["pods"], "verbs": ["get"]}],
            "llm-inference",
            "wildcard",
        ),
        (
            [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
            "llm-inference",
            "secrets",
        ),
        (
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["deletecollection"]}],
            "llm-inference",
            "verb",
        ),
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}], "argo", "pod deletion"),
        (
            [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}],
            None,
            "namespaced Role",
        ),
        (
            [{"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["patch"]}],
            "kube-system",
            "resourceNames",
        ),
        (
            [
                {
                    "apiGroups": ["apps"],
                    "resources": ["daemonsets"],
                    "resourceNames": ["kube-proxy"],
                    "verbs": ["patch"],
                }
            ],
            "kube-system",
            "resourceNames",
        ),
        (  # a hedge patches a Deployment's count; nothing deletes or replaces one
            [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["delete", "update"]}],
            "llm-inference",
            "delete",
        ),
        (
            [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["patch"]}],
            "llm-inference",
            "patch",
        ),
        (
            [
                {
                    "apiGroups": ["rbac.authorization.k8s.io"],
                    "resources": ["roles"],
                    "verbs": ["bind"],
                }
            ],
            "argo",
            "bind",
        ),
        ([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], None, "nonResourceURLs"),
    ],
)
def test_checker_refuses(rules: list[dict[str, Any]], ns: str | None, expect: str) -> None:
    found = rbac_violations([_role(rules, ns)])
    assert any(expect in v for v in found), found


def test_checker_refuses_foreign_subjects_and_dangling_roles() -> None:
    binding = {
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "argo"},
        "roleRef": {"kind": "Role", "name": "missing", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [{"kind": "Group", "name": "system:authenticated"}],
    }
    found = rbac_violations([binding])
    assert any("roleRef" in v for v in found) and any("Group" in v for v in found), found
