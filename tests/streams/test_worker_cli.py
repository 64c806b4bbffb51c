"""`remediator worker --look-again`: a Kafka worker reads a pod again before deleting it, as
serve does, wherever it has a kube config; `on` without one fails at start, before Kafka is
asked anything; `auto` without one goes on without the look (logged)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from remediator.policy_file import PolicyFile
from remediator.sources.pod_look import PodLook
from remediator.streams.cli import _look, worker

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_a_kube_config_gives_the_worker_serves_look(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    for mode in ("auto", "on"):
        assert isinstance(_look({"look_again": mode, "kubeconfig": str(config)}, PolicyFile()),
                          PodLook)  # fmt: skip
    assert _look({"look_again": "off", "kubeconfig": str(config)}, PolicyFile()) is None


def test_auto_without_a_kube_config_goes_on_without_the_look(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    assert _look({"look_again": "auto", "kubeconfig": missing}, PolicyFile()) is None


def start_with_argo(tmp_path: Path, args: list[str], env: dict[str, str]) -> Result:
    """`remediator worker` with a (closed) Argo Server and broker, its tables under tmp_path."""
    base = ["--broker", "kafka://127.0.0.1:1", "--argo-server", "http://127.0.0.1:1",
            "--table-dir", str(tmp_path / "tables")]  # fmt: skip
    return CliRunner().invoke(worker, base + args, env=env)


def test_on_without_a_kube_config_fails_at_start_before_kafka(tmp_path: Path) -> None:
    result = start_with_argo(
        tmp_path,
        ["--look-again", "on", "--kubeconfig", str(tmp_path / "missing")],
        {"KUBERNETES_SERVICE_HOST": "", "ARGO_TOKEN": "t"},
    )
    assert result.exit_code == 1, result.output
    assert "--look-again on: no kube API" in result.output


def test_argo_without_a_token_is_a_clear_error_at_start(tmp_path: Path) -> None:
    result = start_with_argo(tmp_path, [], {"ARGO_TOKEN": "", "ARGO_TOKEN_FILE": ""})
    assert result.exit_code == 1 and "ARGO_TOKEN" in result.output, result.output
