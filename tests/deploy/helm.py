"""The Helm chart in deploy/helm/remediator, rendered by the pinned helm CLI that
tests/cluster/build-helm builds from the Go module proxy (beside the control plane's binaries)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import support as s

CHART = s.DEPLOY / "helm" / "remediator"
PRODUCTION_VALUES = CHART / "values-production.yaml"
RELEASE = "remediator"
NAMESPACE = "remediator"

sys.path.insert(0, str(s.REPO / "tests" / "cluster"))
from cluster import bin_dir  # noqa: E402

# Labels the chart adds to every object's metadata (never to a selector): Helm's standard
# ones, and part-of on the objects Kustomize leaves without it (components, monitoring).
CHART_LABELS = {
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
    "app.kubernetes.io/part-of",
}


def helm_bin() -> str:
    """The pinned helm, or a failed test that says how to build it (never a silent skip)."""
    path = bin_dir() / "helm"
    if not path.exists():
        pytest.fail(f"{path} is missing: run tests/cluster/build-helm", pytrace=False)
    return str(path)


def helm(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [helm_bin(), *args]
    if kubeconfig is not None:
        cmd += ["--kubeconfig", str(kubeconfig)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def template_args(values: dict[str, Any] | None = None, files: tuple[Path, ...] = ()) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for f in files:
        args += ["--values", str(f)]
    if values is not None:
        # --set-json per top-level key: the types arrive exactly as given (no string coercion)
        args += [a for k, v in values.items() for a in ("--set-json", f"{k}={json.dumps(v)}")]
    return args


@functools.cache
def _render(values_json: str, files: tuple[Path, ...]) -> tuple[dict[str, Any], ...]:
    out = helm(*template_args(json.loads(values_json), files))
    if out.returncode != 0:
        pytest.fail(f"helm template failed:\n{out.stderr}", pytrace=False)
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


def render(
    values: dict[str, Any] | None = None, files: tuple[Path, ...] = ()
) -> list[dict[str, Any]]:
    """`helm template` of the chart; fresh copies (the rendering is cached)."""
    docs = _render(json.dumps(values or {}, sort_keys=True), files)
    return json.loads(json.dumps(docs))  # type: ignore[no-any-return]


def production() -> list[dict[str, Any]]:
    return render(files=(PRODUCTION_VALUES,))
