"""What the manifests must mean, beyond being valid: the faults of the published
warmup DaemonSet stay fixed, probes mean what they say, secrets stay references."""

from __future__ import annotations

from typing import Any

import yaml

from remediator.policy_file import load_policy
from tests.deploy import support as s

PROD = s.DEPLOY / "overlays" / "production"


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _cpu_m(q: str) -> float:
    return float(q[:-1]) if q.endswith("m") else float(q) * 1000


def _mem_mi(q: str) -> float:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    return float(q[:-2]) * units[q[-2:]]


def test_gpu_warmup_holds_no_gpu_and_stays_running() -> None:
    docs = s.render(s.DEPLOY / "gpu-warmup")
    ds = s.find(docs, "DaemonSet", "gpu-warmup", "kube-system")
    pod = _pod(ds)
    for c in _containers(pod):
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            assert not any("gpu" in k for k in res.get(part, {})), f"{c['name']} requests a GPU"
        assert _cpu_m(res["requests"]["cpu"]) <= 10 and _mem_mi(res["limits"]["memory"]) <= 64
    (main,) = pod["containers"]
    assert "command" not in main and main["image"].startswith("registry.k8s.io/pause:")
    assert not any("torch" in str(c.get("command")) for c in _containers(pod))
    assert "readinessProbe" not in main  # Ready == init containers done == image on node
    prio = s.find(docs, "PriorityClass", pod["priorityClassName"])
    assert prio["value"] < 0 and prio["preemptionPolicy"] == "Never"


def test_gpu_warmup_prepulls_the_inference_image() -> None:
    ds = s.find(s.render(s.DEPLOY / "gpu-warmup"), "DaemonSet", "gpu-warmup")
    vllm = s.find(
        s.render(s.DEPLOY / "examples" / "vllm-inference"), "Deployment", "vllm-llama-70b"
    )
    inits = {c["name"]: c for c in _pod(ds)["initContainers"]}
    # `remediator step rollout-restart --image` patches the init container named prepull.
    assert inits["prepull"]["image"] == _pod(vllm)["containers"][0]["image"]


def test_vllm_probes_mean_engine_ready_and_flags_are_set() -> None:
    vllm = s.find(
        s.render(s.DEPLOY / "examples" / "vllm-inference"), "Deployment", "vllm-llama-70b"
    )
    pod = _pod(vllm)
    (c,) = pod["containers"]
    assert c["startupProbe"]["httpGet"]["path"] == "/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/models"
    args = c["args"]
    flags = dict(zip(args[::2], args[1::2], strict=True))
    assert flags["--tensor-parallel-size"] == "2"
    assert flags["--gpu-memory-utilization"] == "0.85"
    assert flags["--max-model-len"] == "32768"
    assert flags["--max-num-seqs"] == "256"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == flags["--tensor-parallel-size"]
    assert any(i["name"] == "preload-weights" for i in pod["initContainers"])
    assert vllm["spec"]["template"]["metadata"]["labels"]["app"] == "vllm-inference"


def test_remediator_runs_locked_down_with_probes() -> None:
    dep = s.find(s.render(PROD), "Deployment", "remediator", "remediator")
    pod = _pod(dep)
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    assert c["args"][:3] == ["serve", "--policy", "/etc/remediator/policy.yaml"]


def test_secrets_are_references_only() -> None:
    for where, doc in s.all_rendered():
        if doc["kind"] == "Secret":
            assert doc["type"] == "kubernetes.io/service-account-token" and "data" not in doc, where
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in _containers(_pod(doc)):
                for e in c.get("env", []):
                    if any(w in e["name"] for w in ("TOKEN", "SECRET", "PASSWORD")):
                        assert "secretKeyRef" in e.get("valueFrom", {}), f"{where}: {e['name']}"


def test_kill_switch_is_live_and_survives_a_reapply() -> None:
    docs = s.render(PROD)
    dep = s.find(docs, "Deployment", "remediator")
    pod = _pod(dep)
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "switches")
    # A directory mount (no subPath): kubelet refreshes it when the ConfigMap changes.
    assert mount["mountPath"] == "/etc/remediator/switches" and "subPath" not in mount
    vol = next(v for v in pod["volumes"] if v["name"] == "switches")
    cm = s.find(docs, "ConfigMap", vol["configMap"]["name"])
    assert "data" not in cm  # apply never resets a key it does not set


def test_pdb_lease_and_service_match_the_deployment() -> None:
    docs = s.render(PROD)
    dep = s.find(docs, "Deployment", "remediator")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    pdb = s.find(docs, "PodDisruptionBudget", "remediator")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < dep["spec"]["replicas"]
    svc = s.find(docs, "Service", "remediator")
    assert svc["spec"]["selector"].items() <= labels.items()
    env = {e["name"]: e for e in _pod(dep)["containers"][0]["env"]}
    lease = s.find(docs, "Lease", env["REMEDIATOR_LEASE_NAME"]["value"], "remediator")
    role = s.find(docs, "Role", "remediator-leader-election")
    assert role["rules"][0]["resourceNames"] == [lease["metadata"]["name"]]
    assert env["REMEDIATOR_IMAGE"]["value"] == _pod(dep)["containers"][0]["image"]


def test_no_image_floats() -> None:
    for where, doc in s.all_rendered():
        if doc["kind"] in ("Deployment", "DaemonSet"):
            for c in _containers(_pod(doc)):
                image = c["image"]
                assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), (
                    f"{where}: {image}"
                )


def test_sensors_post_to_the_remediator_service() -> None:
    svc = s.find(s.render(s.DEPLOY / "base"), "Service", "remediator")
    url = f"http://remediator.{svc['metadata']['namespace']}.svc:{svc['spec']['ports'][0]['port']}/events"
    docs = s.render(s.SENSORS)
    sources = {
        (d["metadata"]["name"], event)
        for d in docs
        if d["kind"] == "EventSource"
        for kind in ("webhook", "resource")
        for event in d["spec"].get(kind, {})
    }
    sensors = [d for d in docs if d["kind"] == "Sensor"]
    assert sensors
    for sensor in sensors:
        for dep in sensor["spec"]["dependencies"]:
            assert (dep["eventSourceName"], dep["eventName"]) in sources
        for trig in sensor["spec"]["triggers"]:
            http = trig["template"]["http"]
            assert http["url"] == url
            assert http["headers"]["Content-Type"] == "application/cloudevents+json"
            dests = {p["dest"] for p in http["payload"]}
            assert {"specversion", "id", "source", "type"} <= dests


def test_standalone_sensor_submits_a_project_template() -> None:
    docs = s.render(s.SENSORS / "standalone")
    (sensor,) = [d for d in docs if d["kind"] == "Sensor"]
    wf = sensor["spec"]["triggers"][0]["template"]["argoWorkflow"]["source"]["resource"]
    assert wf["spec"]["workflowTemplateRef"]["name"] == "restart-gpu-warmup"
    assert sensor["spec"]["triggers"][0]["rateLimit"]["requestsPerUnit"] > 0


def _policy_and_settings(overlay: str) -> tuple[str, dict[str, str]]:
    docs = s.render(s.DEPLOY / "overlays" / overlay)
    by_prefix = {
        d["metadata"]["name"].rsplit("-", 1)[0]: d for d in docs if d["kind"] == "ConfigMap"
    }
    return by_prefix["remediator-policy"]["data"]["policy.yaml"], by_prefix["remediator-settings"][
        "data"
    ]


def test_shipped_policies_load_with_the_project_loader_and_agree() -> None:
    """The service refuses a bad policy at start; the shipped ones must load, and the
    dry-run one may differ from production only in guardrails.dry_run."""
    prod_text, prod_env = _policy_and_settings("production")
    dry_text, dry_env = _policy_and_settings("dry-run")
    prod, dry = load_policy(prod_text, "production"), load_policy(dry_text, "dry-run")
    assert not prod.dry_run and dry.dry_run
    assert prod.with_dry_run() == dry
    for policy, env in ((prod, prod_env), (dry, dry_env)):
        listed = set(env["REMEDIATOR_INFERENCE_NAMESPACES"].split(","))
        rules = policy.rules
        assert set(rules.stuck_pod.namespaces) == listed
        warmup = rules.image_update
        assert (
            f"{warmup.warmup_namespace}/{warmup.warmup_daemonset}"
            == (env["REMEDIATOR_WARMUP_DAEMONSET"])
        )
    assert prod.rules.gpu_memory.cordon  # the overlay holds the cordon component
    assert yaml.safe_load(prod_text)["guardrails"]["dry_run"] == {"enabled": False}
