"""The WorkflowTemplates in workflows/: valid against the published Argo schema
(relaxed only where tests/data/README.md says), every parameter declared, and
every `remediator step ...` line accepted by the step CLI."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from remediator.executors.argo_params import WORKFLOWS
from tests.standins.argo_server import SCHEMA_PATH, WORKFLOWS_DIR, relaxed_schema, validator

# The templates the executor submits: workflows/ must hold exactly these (one row of the
# action table and one `Workflow` add one; nothing here needs to change).
TEMPLATE_NAMES = {w.template for w in WORKFLOWS.values()}
# The step command lines as issue 3 writes them (and issue 18 adds --phase: the look again
# before the delete): flag -> required.
ISSUE_STEPS: dict[str, dict[str, bool]] = {
    "delete-pod": {"--namespace": True, "--pod": True, "--uid": True, "--phase": False},
    "rollout-restart": {
        "--namespace": True,
        "--daemonset": True,
        "--image": False,
        "--timeout": True,
    },
    "verify-gpu-memory": {"--samples": True, "--interval": True, "--max-spread-mib": True},
    "cordon-node": {"--node": True},
    # issue 20: hedged starts, and the exit handler that ends a hedge its step left
    "hedge-pod": {
        "--namespace": True,
        "--deployment": True,
        "--pod": True,
        "--uid": True,
        "--timeout": True,
    },
    "end-hedge": {"--namespace": True, "--deployment": True, "--uid": True},
}
# Values an incident would bring for the parameters that have no default.
SAMPLE_VALUES = {
    "namespace": "inference",
    "pod": "vllm-llama-70b-0",
    "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
    "workload": "inference.statefulset.vllm-llama-70b",
    "node": "gpu-node-7",
    "image": "registry.example/models/vllm:0.6.3",
    "incident": "stuck-inference-vllm-llama-70b-0",
    "reason": "engine_init 75s > budget 60s",
    "phase": "engine_init",
    "deployment": "vllm-llama-70b",
}
_REF = re.compile(r"\{\{\s*([^{}]+?)\s*\}\}")


def _files() -> list[Path]:
    return sorted(WORKFLOWS_DIR.glob("*.yaml"))


def _docs() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in _files():
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, f"{path.name}: one WorkflowTemplate per file"
        assert docs[0]["metadata"]["name"] == path.stem, f"{path.name}: name matches the file"
        out[path.stem] = docs[0]
    return out


DOCS = _docs()


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for x in node:
            yield from _strings(x)
    elif isinstance(node, dict):
        for x in node.values():
            yield from _strings(x)


def _refs(node: Any) -> set[str]:
    return {m.group(1) for s in _strings(node) for m in _REF.finditer(s)}


def _declared(params: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {p["name"]: p.get("value") for p in params or []}


def test_every_action_has_its_template() -> None:
    assert set(DOCS) == TEMPLATE_NAMES
    from remediator.contract.actions import ACTIONS

    assert set(WORKFLOWS) == {name for name, spec in ACTIONS.items() if spec.acts}


def test_only_int_or_string_is_relaxed() -> None:
    original = json.loads(SCHEMA_PATH.read_text())
    relaxed = relaxed_schema()
    changed = {
        k
        for k in original["definitions"]
        if original["definitions"][k] != relaxed["definitions"][k]
    }
    assert changed == {"io.k8s.apimachinery.pkg.util.intstr.IntOrString"}
    assert {k: v for k, v in original.items() if k != "definitions"} == {
        k: v for k, v in relaxed.items() if k != "definitions"
    }


@pytest.mark.parametrize("name", sorted(TEMPLATE_NAMES))
def test_template_validates_against_the_schema(name: str) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator().iter_errors(DOCS[name])]
    assert errors == []


def test_schema_check_can_fail() -> None:
    broken = json.loads(json.dumps(DOCS["cordon-gpu-node"]))
    broken["spec"]["templates"][0]["retryStrategy"]["limit"] = [3]
    broken["spec"]["activeDeadlineSeconds"] = "soon"
    assert len(list(validator().iter_errors(broken))) >= 1


def _unknown_keys(node: Any, schema: dict[str, Any], defs: dict[str, Any], at: str) -> list[str]:
    """Keys the schema does not define: the published schema does not forbid
    them (no additionalProperties: false), but Argo's controller drops them
    silently, so a typo would pass validation and do nothing."""
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    found: list[str] = []
    if isinstance(node, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, value in node.items():
            if props is not None and key in props:
                found += _unknown_keys(value, props[key], defs, f"{at}.{key}")
            elif isinstance(extra, dict):
                found += _unknown_keys(value, extra, defs, f"{at}.{key}")
            elif props is not None:
                found.append(f"{at}.{key}")
    elif isinstance(node, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(node):
            found += _unknown_keys(item, schema["items"], defs, f"{at}[{i}]")
    return found


@pytest.mark.parametrize("name", sorted(TEMPLATE_NAMES))
def test_template_has_no_field_the_schema_does_not_know(name: str) -> None:
    defs = relaxed_schema()["definitions"]
    root = {"$ref": "#/definitions/io.argoproj.workflow.v1alpha1.WorkflowTemplate"}
    assert _unknown_keys(DOCS[name], root, defs, "") == []
    typo = json.loads(json.dumps(DOCS[name]))
    typo["spec"]["templates"][0]["retryStrategey"] = {"limit": 1}
    assert _unknown_keys(typo, root, defs, "") == [".spec.templates[0].retryStrategey"]


@pytest.mark.parametrize("name", sorted(TEMPLATE_NAMES))
def test_every_parameter_referenced_is_declared(name: str) -> None:
    spec = DOCS[name]["spec"]
    workflow_params = _declared(spec.get("arguments", {}).get("parameters"))
    top = {k: v for k, v in spec.items() if k != "templates"}
    for ref in _refs(top):
        assert ref.startswith("workflow.parameters."), ref
        assert ref.removeprefix("workflow.parameters.") in workflow_params, ref
    for tmpl in spec["templates"]:
        inputs = _declared(tmpl.get("inputs", {}).get("parameters"))
        steps = [s["name"] for group in tmpl.get("steps", []) for s in group]
        for ref in _refs(tmpl):
            kind, _, rest = ref.partition(".")
            if ref == "item":
                assert any("withParam" in s or "withItems" in s for g in tmpl["steps"] for s in g)
            elif kind == "workflow":
                assert rest.removeprefix("parameters.") in workflow_params, f"{tmpl['name']}: {ref}"
            elif kind == "inputs":
                assert rest.removeprefix("parameters.") in inputs, f"{tmpl['name']}: {ref}"
            elif kind == "steps":
                assert rest.split(".")[0] in steps, f"{tmpl['name']}: {ref}"
            else:
                pytest.fail(f"{name}/{tmpl['name']}: unexpected reference {ref!r}")


def _calls() -> Iterator[tuple[str, dict[str, Any]]]:
    for name, doc in DOCS.items():
        for tmpl in doc["spec"]["templates"]:
            for group in tmpl.get("steps", []):
                yield from ((name, s) for s in group)
            yield from ((name, t) for t in tmpl.get("dag", {}).get("tasks", []))


@pytest.mark.parametrize(
    ("name", "call"),
    list(_calls()),
    ids=lambda x: str(x.get("name", x)) if isinstance(x, dict) else x,
)
def test_every_call_reaches_a_template_with_the_right_arguments(
    name: str, call: dict[str, Any]
) -> None:
    if "templateRef" in call:
        ref = call["templateRef"]
        assert ref["name"] in DOCS, f"templateRef to {ref['name']!r}, not in workflows/"
        templates = {t["name"]: t for t in DOCS[ref["name"]]["spec"]["templates"]}
        target = templates.get(ref["template"])
    else:
        templates = {t["name"]: t for t in DOCS[name]["spec"]["templates"]}
        target = templates.get(call["template"])
    assert target is not None, call
    wanted = _declared(target.get("inputs", {}).get("parameters"))
    given = {p["name"] for p in call.get("arguments", {}).get("parameters", [])}
    assert given <= set(wanted), f"undeclared inputs {given - set(wanted)}"
    missing = {k for k, v in wanted.items() if v is None} - given
    assert not missing, f"{call['name']}: inputs without value {missing}"


def _step_lines() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, doc in DOCS.items():
        for tmpl in doc["spec"]["templates"]:
            container = tmpl.get("container")
            if container and container.get("command") == ["remediator"]:
                yield name, tmpl["name"], container


STEP_LINES = list(_step_lines())


def test_every_template_runs_a_step() -> None:
    assert {n for n, _, _ in STEP_LINES} == TEMPLATE_NAMES


def _flags(args: list[str]) -> dict[str, str]:
    assert args[0] == "step" and args[1] in ISSUE_STEPS, args
    pairs = args[2:]
    assert len(pairs) % 2 == 0, f"flag without value in {args}"
    flags = dict(zip(pairs[::2], pairs[1::2], strict=True))
    assert all(f.startswith("--") for f in flags), args
    return flags


@pytest.mark.parametrize(
    ("name", "tmpl", "container"), STEP_LINES, ids=lambda x: x if isinstance(x, str) else ""
)
def test_step_line_matches_the_issue(name: str, tmpl: str, container: dict[str, Any]) -> None:
    args = container["args"]
    flags = _flags(args)
    spec = ISSUE_STEPS[args[1]]
    assert set(flags) <= set(spec), f"flags not in the issue: {set(flags) - set(spec)}"
    assert {f for f, req in spec.items() if req} <= set(flags)


def _resolve(text: str, scope: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        return scope[m.group(1).split(".")[-1]]

    return _REF.sub(one, text)


def _scope(name: str, tmpl: str) -> dict[str, str]:
    """Parameter values as they would arrive: defaults, else an incident's. An
    empty default (image) is only ever used under a `when` that skips the step
    that would pass it, so that step sees an incident's value."""
    spec = DOCS[name]["spec"]
    scope = {
        k: v if v else SAMPLE_VALUES[k]
        for k, v in _declared(spec["arguments"]["parameters"]).items()
    }
    for t in spec["templates"]:
        if t["name"] == tmpl:
            for k in _declared(t.get("inputs", {}).get("parameters")):
                scope.setdefault(k, SAMPLE_VALUES.get(k, "x"))
    scope.setdefault("node", SAMPLE_VALUES["node"])
    return scope


@pytest.mark.parametrize(
    ("name", "tmpl", "container"), STEP_LINES, ids=lambda x: x if isinstance(x, str) else ""
)
def test_step_line_is_accepted_by_the_step_cli(
    name: str, tmpl: str, container: dict[str, Any]
) -> None:
    cli = pytest.importorskip("remediator.steps.cli", reason="step CLI not written yet")
    args = container["args"]
    command = cli.step.commands.get(args[1])
    assert command is not None, f"remediator step has no {args[1]!r}"
    options = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
    assert set(_flags(args)) <= options
    # Parse the line as the step would run it, with real values: click checks
    # types, ranges and the step's own validators (names, UID, image).
    scope = _scope(name, tmpl)
    resolved = [_resolve(a, scope) for a in args[2:]]
    ctx = command.make_context(args[1], resolved)
    assert ctx.params  # parsed, callbacks ran
    envvars = {p.envvar for p in command.params if isinstance(p, click.Option) and p.envvar}
    for env in container.get("env", []):
        if not env["name"].startswith("NVIDIA_"):
            assert env["name"] in envvars, f"{env['name']} is read by no option of {args[1]}"


def test_step_cli_check_can_fail() -> None:
    cli = pytest.importorskip("remediator.steps.cli", reason="step CLI not written yet")
    with pytest.raises(click.UsageError):
        cli.step.commands["delete-pod"].make_context(
            "delete-pod", ["--namespace", "ns", "--pod", "p", "--uid", "foo; rm -rf"]
        )


@pytest.mark.parametrize("name", sorted(TEMPLATE_NAMES))
def test_runs_safely(name: str) -> None:
    spec = DOCS[name]["spec"]
    assert spec["serviceAccountName"] == "remediator-workflow"
    assert spec["activeDeadlineSeconds"] > 0
    assert spec["podGC"]["strategy"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    for tmpl in spec["templates"]:
        box = tmpl.get("container") or tmpl.get("script")
        if box is None:
            continue
        assert box["image"].endswith("remediator-image}}"), tmpl["name"]
        assert box["resources"]["requests"] and box["resources"]["limits"], tmpl["name"]
        assert box["securityContext"]["allowPrivilegeEscalation"] is False
        assert "nvidia.com/gpu" not in box["resources"]["limits"]
    image = _declared(spec["arguments"]["parameters"])["remediator-image"]
    assert image == "ghcr.io/remediator/remediator:0.1.0"


@pytest.mark.parametrize(
    ("name", "lock"),
    [
        ("delete-stuck-inference-pod", "workload-{{workflow.parameters.workload}}"),
        (
            "restart-gpu-warmup",
            "workload-{{workflow.parameters.namespace}}.daemonset.{{workflow.parameters.daemonset}}",
        ),
        ("cordon-gpu-node", "node-{{workflow.parameters.node}}"),
        # (one hedge per pod: a Deployment's stalled pods are hedged at once, steps/hedge.py)
        ("hedge-stalled-pod", "hedge-{{workflow.parameters.uid}}"),
    ],
)
def test_one_remediation_per_target_at_a_time(name: str, lock: str) -> None:
    assert DOCS[name]["spec"]["synchronization"]["mutexes"] == [{"name": lock}]


def test_verify_fans_out_over_gpu_nodes_without_taking_a_gpu() -> None:
    templates = {t["name"]: t for t in DOCS["verify-gpu-memory-stability"]["spec"]["templates"]}
    fan = [s for g in templates["verify"]["steps"] for s in g if s["name"] == "verify-node"]
    assert fan[0]["withParam"] == "{{steps.list-gpu-nodes.outputs.result}}"
    node = templates["verify-node"]
    assert node["nodeSelector"] == {"kubernetes.io/hostname": "{{inputs.parameters.node}}"}
    assert json.loads(node["podSpecPatch"]) == {"runtimeClassName": "nvidia"}
    env = {e["name"]: e.get("value") for e in node["container"]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    for box in ("requests", "limits"):
        assert not any("nvidia.com" in k for k in node["container"]["resources"][box])


def test_list_gpu_nodes_script_compiles_and_prints_json() -> None:
    templates = {t["name"]: t for t in DOCS["verify-gpu-memory-stability"]["spec"]["templates"]}
    source = templates["list-gpu-nodes"]["script"]["source"]
    compile(source, "list-gpu-nodes", "exec")
    assert "{{" not in source  # the selector comes through the environment only
