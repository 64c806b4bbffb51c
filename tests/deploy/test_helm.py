"""The Helm chart (deploy/helm/remediator): lint, the same checks as the Kustomize overlays on
what it renders, a values schema that refuses wrong types, and the same objects as the overlays
(every intended difference listed below). Its install on the real API server: tests/live."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from remediator.policy_file import load_policy
from tests.deploy import helm as h
from tests.deploy import support as s
from tests.deploy.test_monitoring import ALERTMANAGER, RULES, RULES_TEST, _promtool
from tests.deploy.test_rbac import TEMPLATES, grants, rbac_violations, submittable

# --- lint -----------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [(), (h.PRODUCTION_VALUES,)], ids=["defaults", "production"])
def test_helm_lint_strict(values: tuple[Path, ...]) -> None:
    args = ["lint", "--strict", str(h.CHART)] + [a for v in values for a in ("--values", str(v))]
    out = h.helm(*args)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


def test_helm_lint_strict_can_fail(tmp_path: Path) -> None:
    """A template that renders a broken document fails the strict lint."""
    chart = tmp_path / "remediator"
    shutil.copytree(h.CHART, chart)  # symlinks followed: files/ holds real copies here
    (chart / "templates" / "broken.yaml").write_text("kind: ConfigMap\nmetadata: [\n")
    out = h.helm("lint", "--strict", str(chart))
    assert out.returncode != 0 and "broken.yaml" in out.stdout + out.stderr


def test_files_are_the_overlays_own_sources() -> None:
    """Rendered from the same sources: files/ links to deploy/, it holds no copy."""
    links = {
        "policy.yaml": s.DEPLOY / "base" / "policy.yaml",
        "remediator.rules.yaml": RULES,
        "remediator-cold-start.json": s.DEPLOY / "monitoring/grafana/remediator-cold-start.json",
    }
    for name, source in links.items():
        path = h.CHART / "files" / name
        assert path.is_symlink() and path.resolve() == source.resolve(), name


# --- what it renders passes the overlays' checks --------------------------------------------

# Value sets worth checking: a first install, production, and everything opt-in at once.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "production": {
        "dryRun": False,
        "serviceMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "sensors": {"enabled": True},
    },
    "two-namespaces-cordon": {
        "dryRun": False,
        "inferenceNamespaces": ["llm-inference", "llm-batch"],
        "cordonNodes": True,
        "sensors": {"enabled": True},
    },
    "kafka": {"kafka": {"enabled": True}},
    "kafka-acting": {"dryRun": False, "kafka": {"enabled": True, "workers": 3}},
}


def _rendered(name: str) -> list[dict[str, Any]]:
    return h.render(VALUE_SETS[name])


def _inference(name: str) -> set[str]:
    return set(VALUE_SETS[name].get("inferenceNamespaces", ["llm-inference"]))


def _validate(doc: dict[str, Any]) -> None:
    """tests/deploy/test_manifests.py's validators, by the same rule."""
    api = str(doc["apiVersion"])
    if api.startswith("argoproj.io/"):
        errors = s.validate_argo(doc) + [f"unknown field {f}" for f in s.argo_unknown_fields(doc)]
        assert not errors, errors
    elif api.startswith("monitoring.coreos.com/"):
        assert doc["kind"] in ("PrometheusRule", "ServiceMonitor"), doc["kind"]
    else:
        s.validate_k8s(doc)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rendered_objects_validate(name: str) -> None:
    docs = _rendered(name)
    ids = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]
    assert len(ids) == len(set(ids)), "duplicate objects"
    for doc in docs:
        _validate(doc)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_rendered_rbac_is_least_privilege(name: str) -> None:
    assert rbac_violations(_rendered(name), _inference(name)) == []


def test_the_submit_role_names_every_template_the_executor_submits() -> None:
    assert submittable(_rendered("production")) == TEMPLATES


def test_each_inference_namespace_gets_its_own_rbac() -> None:
    docs = _rendered("two-namespaces-cordon")
    for ns in ("llm-inference", "llm-batch"):
        for name in ("remediator-observe", "remediator-workflow-delete-pods"):
            s.find(docs, "Role", name, ns)
            s.find(docs, "RoleBinding", name, ns)
        s.find(docs, "Role", "remediator-eventsource-watch", ns)
    deletes = {
        d["metadata"]["namespace"]
        for d in docs
        if d["kind"] == "Role"
        for r in d["rules"]
        if "pods" in r["resources"] and "delete" in r["verbs"]
    }
    assert deletes == {"llm-inference", "llm-batch"}
    settings = s.find(docs, "ConfigMap", "remediator-settings")
    assert settings["data"]["REMEDIATOR_INFERENCE_NAMESPACES"] == "llm-inference,llm-batch"
    policy = load_policy(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])
    assert set(policy.rules.stuck_pod.namespaces) == {"llm-inference", "llm-batch"}


# Any DNS label (RFC 1123): it may be all digits, or a word YAML reads as another type.
NAMESPACE_NAMES = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?", fullmatch=True).filter(
    lambda n: n not in {"argo", "argo-events", "kube-system", "remediator"}
)
# Valid namespace names that YAML 1.1 (PyYAML, and the API server's sigs.k8s.io/yaml) reads
# as a boolean, a number or null when a template writes them bare.
NOT_STRINGS_BARE = ["on", "no", "y", "off", "true", "null", "123", "0"]


@settings(max_examples=6)  # each example is one `helm template`
@given(namespaces=st.lists(NAMESPACE_NAMES, min_size=1, max_size=4, unique=True))
@example(namespaces=NOT_STRINGS_BARE)
def test_any_namespace_list_gets_exactly_its_own_rbac(namespaces: list[str]) -> None:
    docs = h.render(
        {"dryRun": False, "inferenceNamespaces": namespaces, "sensors": {"enabled": True}}
    )
    assert rbac_violations(docs, set(namespaces)) == []
    for name in ("remediator-observe", "remediator-workflow-delete-pods"):
        where = {d["metadata"]["namespace"] for d in docs if d["metadata"]["name"] == name}
        assert where == set(namespaces), name
    settings_cm = s.find(docs, "ConfigMap", "remediator-settings")["data"]
    assert settings_cm["REMEDIATOR_INFERENCE_NAMESPACES"] == ",".join(namespaces)
    policy = load_policy(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])
    assert list(policy.rules.stuck_pod.namespaces) == namespaces


def test_every_name_stays_a_string_whatever_yaml_would_read_it_as() -> None:
    """Release, namespaces and secret names spelt like YAML booleans or numbers render
    quoted: a bare `namespace: on` is `true` to the API server, and the apply fails."""
    values = {
        "dryRun": False,
        "inferenceNamespaces": ["on", "123"],
        "argo": {"namespace": "off"},
        "sensors": {"enabled": True, "namespace": "yes"},
        "slack": {"botToken": {"secretName": "null", "key": "true"}},
    }
    args = ["template", "no", str(h.CHART), "--namespace", "1"]
    args += [a for k, v in values.items() for a in ("--set-json", f"{k}={json.dumps(v)}")]
    out = h.helm(*args)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    spaces = {d["metadata"].get("namespace") for d in docs} - {None}
    assert spaces == {"1", "on", "123", "off", "yes", "kube-system"}
    assert {d["metadata"]["labels"]["app.kubernetes.io/instance"] for d in docs} == {"no"}
    refs = [r for d in docs for r in _walk(d) if isinstance(r, dict) and "secretKeyRef" in r]
    assert refs and {(r["secretKeyRef"]["name"], r["secretKeyRef"]["key"]) for r in refs} >= {
        ("null", "true")
    }


def _walk(node: Any) -> Any:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def test_rbac_check_refuses_pod_deletion_outside_the_listed_namespaces() -> None:
    """The checker with the chart's namespaces still fails a grant it does not list."""
    docs = _rendered("two-namespaces-cordon")
    assert any("pod deletion" in v for v in rbac_violations(docs, {"llm-inference"}))


def test_a_first_install_is_a_dry_run_three_times() -> None:
    docs = _rendered("defaults")
    writes = {g for g in grants(docs) if g[3] in {"create", "update", "patch", "delete"}}
    assert writes == {
        ("remediator", "coordination.k8s.io", "leases", "update"),
        ("remediator", "", "configmaps", "patch"),  # the shared state, not an act
    }
    assert s.find(docs, "ConfigMap", "remediator-settings")["data"]["REMEDIATOR_DRY_RUN"] == "true"
    policy = load_policy(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])
    assert policy.dry_run
    env = {e["name"] for e in _container(s.find(docs, "Deployment", "remediator"))["env"]}
    assert "ARGO_TOKEN" not in env
    assert not [d for d in docs if d["kind"] == "Secret"]


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_secrets_are_references_only() -> None:
    for name in VALUE_SETS:
        for doc in _rendered(name):
            if doc["kind"] == "Secret":
                assert doc["type"] == "kubernetes.io/service-account-token" and "data" not in doc
            if doc["kind"] in ("Deployment", "DaemonSet"):
                pod = doc["spec"]["template"]["spec"]
                for c in [*pod.get("initContainers", []), *pod["containers"]]:
                    for e in c.get("env", []):
                        if any(w in e["name"] for w in ("TOKEN", "SECRET", "PASSWORD")):
                            assert "secretKeyRef" in e.get("valueFrom", {}), e["name"]


def test_prometheusrule_is_the_rules_file_and_passes_promtool(tmp_path: Path) -> None:
    rule = s.find(_rendered("production"), "PrometheusRule", "remediator", "remediator")
    assert rule["spec"] == yaml.safe_load(RULES.read_text())
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # The rules' own unit tests, run on what the chart rendered.
    (tmp_path / RULES.name).write_text(yaml.safe_dump(rule["spec"]))
    (tmp_path / RULES_TEST.name).write_text(RULES_TEST.read_text())
    assert "SUCCESS" in _promtool("check", "rules", RULES.name, cwd=tmp_path)
    assert "SUCCESS" in _promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)


def test_servicemonitor_selects_the_chart_service() -> None:
    docs = _rendered("production")
    mon, svc = s.find(docs, "ServiceMonitor", "remediator"), s.find(docs, "Service", "remediator")
    labels = svc["metadata"]["labels"]
    assert mon["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert labels[mon["spec"]["jobLabel"]] == "remediator"  # RemediatorDown: job="remediator"
    assert mon["spec"]["namespaceSelector"]["matchNames"] == ["remediator"]


def test_alertmanager_route_reaches_the_chart_service_and_passes_amtool(tmp_path: Path) -> None:
    svc = s.find(_rendered("production"), "Service", "remediator")
    url = f"http://remediator.{svc['metadata']['namespace']}.svc:{svc['spec']['ports'][0]['port']}"
    cfg = yaml.safe_load(ALERTMANAGER.read_text())
    hook = next(r for r in cfg["receivers"] if r["name"] == "remediator")["webhook_configs"][0]
    assert hook["url"] == f"{url}/events"
    out = s.run([s.tool("amtool"), "check-config", str(ALERTMANAGER)])
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_grafana_dashboard_is_the_shipped_json() -> None:
    cm = s.find(_rendered("production"), "ConfigMap", "remediator-grafana-dashboard")
    source = (s.DEPLOY / "monitoring/grafana/remediator-cold-start.json").read_text()
    assert cm["data"]["remediator-cold-start.json"].strip() == source.strip()
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_sensors_cover_every_inference_namespace() -> None:
    docs = _rendered("two-namespaces-cordon")
    source = s.find(docs, "EventSource", "inference-workloads", "argo-events")
    sensor = s.find(docs, "Sensor", "image-update-to-remediator", "argo-events")
    events = set(source["spec"]["resource"])
    assert {r["namespace"] for r in source["spec"]["resource"].values()} == {
        "llm-inference",
        "llm-batch",
    }
    deps = {d["name"]: d["eventName"] for d in sensor["spec"]["dependencies"]}
    assert set(deps.values()) == events
    for trig in sensor["spec"]["triggers"]:
        cond = trig["template"]["conditions"]
        assert cond in deps
        assert {p["src"]["dependencyName"] for p in trig["template"]["http"]["payload"]} == {cond}
        assert trig["template"]["http"]["url"] == "http://remediator.remediator.svc:8080/events"


def test_helm_test_hook_checks_readyz_through_the_service() -> None:
    docs = h.render()
    (pod,) = [d for d in docs if d["metadata"].get("annotations", {}).get("helm.sh/hook")]
    assert pod["kind"] == "Pod" and pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    svc = s.find(docs, "Service", "remediator")
    script = pod["spec"]["containers"][0]["command"][-1]
    assert f"http://remediator.remediator.svc:{svc['spec']['ports'][0]['port']}/readyz" in script
    assert (
        pod["spec"]["containers"][0]["image"]
        == _container(s.find(docs, "Deployment", "remediator"))["image"]
    )


# --- values -----------------------------------------------------------------------------------


def test_image_by_digest_is_what_the_workflows_run_too() -> None:
    digest = "sha256:" + "ab" * 32
    docs = h.render({"image": {"repository": "r.example/remediator", "digest": digest}})
    c = _container(s.find(docs, "Deployment", "remediator"))
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert c["image"] == env["REMEDIATOR_IMAGE"] == f"r.example/remediator@{digest}"


def test_lease_and_replicas() -> None:
    docs = h.render(
        {"replicas": 1, "leaderElection": {"leaseName": "rem-lead", "leaseDurationSeconds": 30}}
    )
    dep = s.find(docs, "Deployment", "remediator")
    assert dep["spec"]["replicas"] == 1
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]  # would block drains
    lease = s.find(docs, "Lease", "rem-lead", "remediator")
    assert "spec" not in lease  # the leader's to write (tests/live/test_helm.py: the upgrade)
    env = {e["name"]: e.get("value") for e in _container(dep)["env"]}
    assert env["REMEDIATOR_LEASE_NAME"] == "rem-lead" and env["REMEDIATOR_LEASE_DURATION"] == "30"
    role = s.find(docs, "Role", "remediator-leader-election")
    assert role["rules"][0]["resourceNames"] == ["rem-lead"]


def test_the_state_file_outlives_the_pod_on_a_claim_with_one_replica() -> None:
    """Off by default: an emptyDir, rolled as before. On: a ReadWriteOnce claim the release
    keeps, mounted where the emptyDir was (the state file is /tmp/remediator/state.db),
    and the pod replaced by Recreate (the new one cannot mount the claim beside the old)."""
    off = s.find(h.render(), "Deployment", "remediator")
    assert off["spec"]["strategy"]["type"] == "RollingUpdate"
    assert not [d for d in h.render() if d["kind"] == "PersistentVolumeClaim"]
    values = {"replicas": 1, "persistence": {"enabled": True, "size": "2Gi",
                                             "storageClass": "fast"}}  # fmt: skip
    docs = h.render(values)
    dep = s.find(docs, "Deployment", "remediator")
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    tmp = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "tmp")
    assert tmp == {"name": "tmp", "persistentVolumeClaim": {"claimName": "remediator-state"}}
    claim = s.find(docs, "PersistentVolumeClaim", "remediator-state")
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                             "resources": {"requests": {"storage": "2Gi"}}}  # fmt: skip
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_a_state_file_on_a_claim_with_two_replicas_is_refused_saying_why() -> None:
    out = h.helm(*h.template_args({"persistence": {"enabled": True}}))
    assert out.returncode != 0 and "persistence.enabled needs replicas: 1" in out.stderr


def test_argo_server_namespace_and_an_existing_token_secret() -> None:
    values = {
        "dryRun": False,
        "argo": {
            "server": "https://argo.example:2746",
            "namespace": "workflows",
            "token": {"existingSecret": "my-argo-token", "key": "jwt"},
        },
    }
    docs = h.render(values)
    settings = s.find(docs, "ConfigMap", "remediator-settings")["data"]
    assert settings["ARGO_SERVER"] == "https://argo.example:2746"
    assert settings["ARGO_NAMESPACE"] == "workflows"
    env = {e["name"]: e for e in _container(s.find(docs, "Deployment", "remediator"))["env"]}
    assert env["ARGO_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "my-argo-token", "key": "jwt"}
    assert not [d for d in docs if d["kind"] == "Secret"]
    s.find(docs, "Role", "remediator-submit-workflows", "workflows")
    s.find(docs, "ServiceAccount", "remediator-workflow", "workflows")


def test_slack_channel_and_secret_references() -> None:
    values = {
        "slack": {"channel": "C0123456789", "botToken": {"secretName": "slack", "key": "bot"}},
        "webhookToken": {"secretName": "hooks", "key": "bearer"},
    }
    docs = h.render(values)
    assert (
        s.find(docs, "ConfigMap", "remediator-settings")["data"]["SLACK_CHANNEL"] == "C0123456789"
    )
    env = {e["name"]: e for e in _container(s.find(docs, "Deployment", "remediator"))["env"]}
    assert env["SLACK_BOT_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "slack", "key": "bot"}
    ref = env["REMEDIATOR_WEBHOOK_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "hooks", "key": "bearer"}


def _policy(docs: list[dict[str, Any]]) -> str:
    return str(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])


def test_policy_inline_gets_the_namespaces_and_dry_run() -> None:
    inline = {
        "stuck_pod": {"budgets": {"engine_init": 90}},
        "guardrails": {"cooldown": {"seconds": 120}},
    }
    docs = h.render({"policy": {"inline": inline}})
    text = _policy(docs)
    policy = load_policy(text, "chart")
    assert policy.dry_run and policy.rules.stuck_pod.namespaces == ("llm-inference",)
    assert yaml.safe_load(text)["stuck_pod"]["budgets"] == {"engine_init": 90}
    acting = load_policy(_policy(h.render({"dryRun": False, "policy": {"inline": inline}})))
    assert not acting.dry_run


def test_policy_changes_roll_the_pods() -> None:
    def checksum(values: dict[str, Any]) -> str:
        dep = s.find(h.render(values), "Deployment", "remediator")
        return str(dep["spec"]["template"]["metadata"]["annotations"]["checksum/policy"])

    inline = {"stuck_pod": {"budgets": {"engine_init": 90}}}
    assert checksum({}) != checksum({"policy": {"inline": inline}})


def test_policy_from_an_existing_configmap() -> None:
    docs = h.render({"policy": {"existingConfigMap": {"name": "my-policy", "key": "p.yaml"}}})
    assert not [d for d in docs if d["metadata"]["name"] == "remediator-policy"]
    dep = s.find(docs, "Deployment", "remediator")
    vol = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "policy")
    assert vol["configMap"] == {
        "name": "my-policy",
        "items": [{"key": "p.yaml", "path": "policy.yaml"}],
    }


def test_policy_naming_other_namespaces_is_refused() -> None:
    inline = {"stuck_pod": {"namespaces": ["elsewhere"]}}
    out = h.helm(*h.template_args({"policy": {"inline": inline}}))
    assert out.returncode != 0 and "differs from inferenceNamespaces" in out.stderr


def test_gpu_warmup_prepulls_the_inference_image_and_can_be_left_out() -> None:
    docs = h.render(
        {
            "gpuWarmup": {
                "enabled": True,
                "image": {"repository": "vllm/vllm-openai", "tag": "v0.9.0"},
            }
        }
    )
    ds = s.find(docs, "DaemonSet", "gpu-warmup", "kube-system")
    inits = {c["name"]: c["image"] for c in ds["spec"]["template"]["spec"]["initContainers"]}
    assert inits == {"prepull": "vllm/vllm-openai:v0.9.0", "warm-driver": "vllm/vllm-openai:v0.9.0"}
    without = h.render({"gpuWarmup": {"enabled": False}})
    assert not [d for d in without if d["kind"] in ("DaemonSet", "PriorityClass")]
    # The service still watches it, wherever it comes from.
    s.find(without, "Role", "remediator-observe-gpu-warmup", "kube-system")


def test_optional_parts_are_off_by_default() -> None:
    kinds = {d["kind"] for d in h.render()}
    assert not kinds & {"ServiceMonitor", "PrometheusRule", "EventSource", "Sensor"}
    names = {d["metadata"]["name"] for d in h.render()}
    assert "remediator-grafana-dashboard" not in names
    assert "remediator-worker" not in names


# --- the Kafka runtime ------------------------------------------------------------------------


def _cli_params(
    docs: list[dict[str, Any]], name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """What the real CLI makes of a Deployment's container: its command, the parsed options
    (args and env as the kubelet gives them: the settings ConfigMap, then the container's own
    env; a secret's value stands in as "<secret>"), and the env."""
    from remediator.cli import main

    c = _container(s.find(docs, "Deployment", name))
    env = dict(s.find(docs, "ConfigMap", "remediator-settings")["data"])
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:
            env[e["name"]] = "<secret>" if "secretKeyRef" in e["valueFrom"] else "<field>"
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("KUBECONFIG", "REMEDIATOR_LISTEN", "REMEDIATOR_WORKER_LISTEN"):
        if key not in env:
            monkeypatch.delenv(key, raising=False)
    command, *args = c["args"]
    mounted = tmp_path / "policy.yaml"  # the ConfigMap, where the kubelet mounts it
    mounted.write_text(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])
    args = [str(mounted) if a == "/etc/remediator/policy.yaml" else a for a in args]
    cmd = main.get_command(click.Context(main), command)  # type: ignore[arg-type]
    assert cmd is not None, command
    ctx = cmd.make_context(command, list(args))
    return command, ctx.params, env


def test_kafka_runs_one_ingest_that_watches_and_workers_that_hold_on_its_word(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The rendered containers, parsed by the real CLI: the ingest watches the inference
    namespaces and holds no secret but the webhook token; the workers require the ingest's
    word on its watch, and in a dry run have no Argo server (what would run is recorded)."""
    docs = _rendered("kafka")
    ingest = s.find(docs, "Deployment", "remediator")
    assert ingest["spec"]["replicas"] == 1
    command, params, env = _cli_params(docs, "remediator", monkeypatch, tmp_path)
    assert command == "ingest"
    assert params["namespaces"] == ("llm-inference",)
    assert params["broker"] == "kafka://kafka.kafka:9092" and params["inputs_partitions"] == 8
    assert params["listen"] == "0.0.0.0:8080"
    assert {k for k, v in env.items() if v == "<secret>"} == {"REMEDIATOR_WEBHOOK_TOKEN"}
    worker = s.find(docs, "Deployment", "remediator-worker")
    assert worker["spec"]["replicas"] == 2
    command, params, env = _cli_params(docs, "remediator-worker", monkeypatch, tmp_path)
    assert command == "worker"
    assert params["ingest_watches"] == "on" and params["watch_silent_s"] == 10.0
    assert params["kill_switch_file"] == "/etc/remediator/switches/kill-switch"
    mounts = {m["mountPath"] for m in _container(worker)["volumeMounts"]}
    assert "/etc/remediator/switches" in mounts
    assert params["broker"] == "kafka://kafka.kafka:9092" and params["replication"] == 3
    assert not params["argo_server"], "a dry run submits nothing"
    assert "ARGO_TOKEN" not in env
    policy = load_policy(s.find(docs, "ConfigMap", "remediator-policy")["data"]["policy.yaml"])
    assert policy.dry_run
    pdbs = {d["metadata"]["name"] for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert pdbs == {"remediator-worker"}


def test_kafka_workers_act_through_argo_when_not_a_dry_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    docs = _rendered("kafka-acting")
    assert s.find(docs, "Deployment", "remediator-worker")["spec"]["replicas"] == 3
    _, params, env = _cli_params(docs, "remediator-worker", monkeypatch, tmp_path)
    assert params["argo_server"] == "https://argo-server.argo:2746"
    assert env["ARGO_TOKEN"] == "<secret>"
    _, _, env = _cli_params(docs, "remediator", monkeypatch, tmp_path)
    assert "ARGO_TOKEN" not in env, "the ingest acts on nothing"


# One wrong value per class of mistake; each must stop `helm template` with the schema's error.
WRONG = {
    "boolean-as-string": ({"dryRun": "false"}, "dryRun"),
    "integer-as-string": ({"replicas": "two"}, "replicas"),
    "integer-below-minimum": ({"replicas": 0}, "replicas"),
    "list-as-string": ({"inferenceNamespaces": "llm-inference"}, "inferenceNamespaces"),
    "empty-list": ({"inferenceNamespaces": []}, "inferenceNamespaces"),
    "not-a-namespace-name": ({"inferenceNamespaces": ["LLM_Inference"]}, "inferenceNamespaces"),
    "unknown-key": ({"dryrun": False}, "dryrun"),
    "unknown-nested-key": ({"image": {"repository": "r", "tagg": "1"}}, "tagg"),
    "enum": ({"image": {"repository": "r", "pullPolicy": "Sometimes"}}, "pullPolicy"),
    "digest-pattern": ({"image": {"repository": "r", "digest": "latest"}}, "digest"),
    "url-pattern": ({"argo": {"server": "argo-server:2746"}}, "server"),
    "object-as-string": ({"policy": {"inline": "stuck_pod: {}"}}, "inline"),
    "empty-secret-key": ({"slack": {"botToken": {"key": ""}}}, "key"),
    "secret-value-instead-of-reference": ({"webhookToken": "s3cr3t"}, "webhookToken"),
    "percentage-pattern": ({"gpuWarmup": {"maxUnavailable": "a quarter"}}, "maxUnavailable"),
    "label-value-not-string": ({"serviceMonitor": {"labels": {"release": 1}}}, "release"),
    "size-pattern": ({"persistence": {"enabled": True, "size": "lots"}}, "size"),
}


@pytest.mark.parametrize(("values", "field"), WRONG.values(), ids=WRONG.keys())
def test_values_schema_refuses(values: dict[str, Any], field: str) -> None:
    out = h.helm(*h.template_args(values))
    assert out.returncode != 0, f"accepted {values}"
    assert "schema" in out.stderr and field in out.stderr, out.stderr


def test_values_schema_describes_every_value_and_values_yaml_teaches() -> None:
    """`helm show values` is values.yaml: every top-level value has a comment above it."""
    out = h.helm("show", "values", str(h.CHART))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    keys = [i for i, line in enumerate(lines) if re.match(r"^[A-Za-z]\w*:", line)]
    assert keys
    for i in keys:
        assert lines[i - 1].startswith("#"), f"no comment above {lines[i]!r}"
    schema = yaml.safe_load((h.CHART / "values.schema.json").read_text())

    def undocumented(node: dict[str, Any], path: str) -> list[str]:
        found = []
        for key, child in node.get("properties", {}).items():
            if "description" not in child:
                found.append(f"{path}.{key}")
            found += undocumented(child, f"{path}.{key}")
        return found

    assert undocumented(schema, "") == []
    assert set(yaml.safe_load(out.stdout)) <= set(schema["properties"])


# --- the same objects as the overlays ---------------------------------------------------------

# Every difference between the chart with production values and the Kustomize sources, and why.
INTENDED = {
    "Namespace remediator": "not rendered by the chart: Helm installs into an existing release "
    "namespace (docs/deploy.md labels it pod-security restricted, as the overlay does)",
    "labels": f"the chart adds {sorted(h.CHART_LABELS)} to every object's metadata, never to a "
    "selector",
    "ConfigMap names": "remediator-policy and remediator-settings keep their names; a checksum "
    "annotation on the pod template rolls the pods, where Kustomize appends a content hash",
    "policy text": "the chart writes the parsed policy (namespaces and dry run set from the "
    "values), so comments and key order differ; the policy itself is equal",
    "REMEDIATOR_LEASE_DURATION": "the chart passes leaderElection.leaseDurationSeconds to the "
    "service (Kustomize leaves the service's default, 15 s)",
    "helm test Pod": "the test hook, not installed with the release",
}

HASHED = re.compile(r"^(remediator-(?:policy|settings))-[a-z0-9]{10}$")


def _normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """One object with exactly the INTENDED differences taken out."""
    d = copy.deepcopy(doc)
    meta = d["metadata"]
    labels = {k: v for k, v in meta.pop("labels", {}).items() if k not in h.CHART_LABELS}
    if labels:
        meta["labels"] = labels
    meta["name"] = HASHED.sub(r"\1", meta["name"])
    if d["kind"] == "ConfigMap" and meta["name"] == "remediator-policy":
        d["data"]["policy.yaml"] = yaml.safe_load(d["data"]["policy.yaml"])
    if d["kind"] == "Deployment":
        tmpl = d["spec"]["template"]
        notes = tmpl["metadata"]["annotations"]
        tmpl["metadata"]["annotations"] = {
            k: v for k, v in notes.items() if not k.startswith("checksum/")
        }
        c = tmpl["spec"]["containers"][0]
        c["env"] = [e for e in c["env"] if e["name"] != "REMEDIATOR_LEASE_DURATION"]
        for ref in c["envFrom"]:
            ref["configMapRef"]["name"] = HASHED.sub(r"\1", ref["configMapRef"]["name"])
        for vol in tmpl["spec"]["volumes"]:
            if "configMap" in vol:
                vol["configMap"]["name"] = HASHED.sub(r"\1", vol["configMap"]["name"])
    return d


def _by_id(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for doc in docs:
        if doc["metadata"].get("annotations", {}).get("helm.sh/hook"):
            continue  # INTENDED: helm test Pod
        n = _normalise(doc)
        out[f"{n['kind']} {n['metadata'].get('namespace', '')}/{n['metadata']['name']}"] = n
    return out


def _compare(chart: list[dict[str, Any]], kustomize: list[dict[str, Any]]) -> list[str]:
    ours, theirs = _by_id(chart), _by_id(kustomize)
    theirs.pop("Namespace /remediator", None)  # INTENDED: Namespace remediator
    diffs = [f"only in the chart: {k}" for k in sorted(ours.keys() - theirs.keys())]
    diffs += [f"only in Kustomize: {k}" for k in sorted(theirs.keys() - ours.keys())]
    diffs += [f"differs: {k}" for k in sorted(ours.keys() & theirs.keys()) if ours[k] != theirs[k]]
    return diffs


def _kustomize(*dirs: Path) -> list[dict[str, Any]]:
    return [copy.deepcopy(d) for directory in dirs for d in s.render(directory)]


def test_production_values_give_the_production_overlay() -> None:
    kustomize = _kustomize(
        s.DEPLOY / "overlays" / "production",
        s.DEPLOY / "gpu-warmup",
        s.DEPLOY / "monitoring",
        s.SENSORS,
    )
    assert _compare(h.production(), kustomize) == []


def test_defaults_give_the_dry_run_overlay() -> None:
    kustomize = _kustomize(s.DEPLOY / "overlays" / "dry-run", s.DEPLOY / "gpu-warmup")
    assert _compare(h.render(), kustomize) == []


def test_cordoning_is_on_and_opting_out_drops_the_grant_and_the_policys_cordon() -> None:
    """On by default (the production overlay holds the cordon component, and the chart's
    production values match it: test_production_values_give_the_production_overlay).
    cordonNodes: false drops the grant and turns the policy's cordon off with it, so a
    cordon is never asked of a workflow that may not make it."""
    cordon_role = ("ClusterRole", "remediator-workflow-cordon-nodes")
    on = h.render({"dryRun": False})
    assert cordon_role in {(d["kind"], d["metadata"]["name"]) for d in on}
    assert load_policy(_policy(on)).rules.gpu_memory.cordon
    off = h.render({"dryRun": False, "cordonNodes": False})
    assert cordon_role not in {(d["kind"], d["metadata"]["name"]) for d in off}
    assert not load_policy(_policy(off)).rules.gpu_memory.cordon
    inline = {"gpu_memory": {"cordon": False}}
    spared = h.render({"dryRun": False, "policy": {"inline": inline}})
    assert not load_policy(_policy(spared)).rules.gpu_memory.cordon  # the grant, unused


def test_an_inline_policy_that_cordons_without_the_grant_is_refused() -> None:
    inline = {"gpu_memory": {"cordon": True}}
    out = h.helm(*h.template_args({"cordonNodes": False, "policy": {"inline": inline}}))
    assert out.returncode != 0 and "cordoning needs cordonNodes: true" in out.stderr


def test_the_comparison_can_fail() -> None:
    """A changed rule, a missing object and an extra label each show up."""
    kustomize = _kustomize(s.DEPLOY / "overlays" / "dry-run", s.DEPLOY / "gpu-warmup")
    chart = h.render()
    role = next(d for d in chart if d["metadata"]["name"] == "remediator-observe")
    role["rules"][0]["verbs"].append("delete")
    chart = [d for d in chart if d["kind"] != "PodDisruptionBudget"]
    next(d for d in chart if d["kind"] == "Service")["metadata"]["labels"]["extra"] = "x"
    diffs = _compare(chart, kustomize)
    assert "differs: Role llm-inference/remediator-observe" in diffs
    assert "only in Kustomize: PodDisruptionBudget remediator/remediator" in diffs
    assert "differs: Service remediator/remediator" in diffs


def test_every_chart_object_carries_the_chart_labels() -> None:
    for doc in h.production():
        labels = doc["metadata"].get("labels", {})
        missing = h.CHART_LABELS - labels.keys()
        assert not missing, f"{doc['kind']}/{doc['metadata']['name']}: {missing}"
