"""The image-update Sensor for real: a new model image on an inference Deployment reaches serve
through the real EventSource (an informer as its ServiceAccount), a real NATS JetStream EventBus
and the real Sensor's HTTP trigger. See events.py for how they run outside pods."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.live.argo.events import ArgoEvents
from tests.live.harness import NS, LiveCluster, Serve, example_deployment, wait_for

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from cluster import bin_dir  # noqa: E402


def test_a_new_model_image_reaches_serve_through_the_real_sensor(
    cluster: LiveCluster,
    workloads: Callable[[dict[str, Any]], dict[str, Any]],
    serve_argo: Callable[..., Serve],
    tmp_path: Path,
) -> None:
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argo-events"}}])
    rbac = (REPO / "sensors" / "common" / "rbac.yaml").read_text()
    cluster.apply([d for d in yaml.safe_load_all(rbac) if d])
    deployment = workloads(example_deployment(name="vllm-events", replicas=1))
    serve = serve_argo()
    before = serve.sample("remediator_inputs_total", source="http")

    with ArgoEvents(cluster, bin_dir(), tmp_path / "events", f"http://127.0.0.1:{serve.port}",
                    serve.webhook_token) as events:  # fmt: skip
        # `afterStart` dates an update by its newest managedFields time, which has whole
        # seconds: an update in the EventSource's first second would be dropped as "before start".
        time.sleep(1.5)
        vllm = next(c for c in deployment["spec"]["template"]["spec"]["containers"])
        new_image = vllm["image"].rsplit(":", 1)[0] + ":v0.9.0"
        patch = {"spec": {"template": {"spec": {"containers": [
            {"name": vllm["name"], "image": new_image}]}}}}  # fmt: skip
        cluster.api(
            "PATCH",
            f"/apis/apps/v1/namespaces/{NS}/deployments/vllm-events",
            patch,
            ctype="application/strategic-merge-patch+json",
        )
        wait_for(
            lambda: serve.sample("remediator_inputs_total", source="http") > before,
            90,
            "the Sensor's POST decoded by serve",
        )
        sensor_log = events.log("sensor")
    assert serve.sample("remediator_input_errors_total", source="http") == 0, serve.log_tail()
    assert "Successfully processed trigger" in sensor_log, sensor_log[-3000:]
