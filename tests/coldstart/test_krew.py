"""The krew manifest: the fields krew requires, versions that agree, and a digest that is the
archive's (rebuilt here from the same sources, byte for byte)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import re
import tarfile
import tomllib

import yaml

from tests.coldstart.support import REPO

KREW = REPO / "deploy" / "krew"


def _build() -> bytes:
    spec = importlib.util.spec_from_file_location("krew_build", KREW / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data: bytes = module.archive()
    return data


def test_the_manifest_is_a_krew_plugin_whose_versions_agree() -> None:
    doc = yaml.safe_load((KREW / "coldstart.yaml").read_text())
    assert doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert doc["kind"] == "Plugin"
    assert doc["metadata"]["name"] == "coldstart"  # kubectl coldstart
    spec = doc["spec"]
    for key in ("version", "homepage", "shortDescription", "description", "platforms"):
        assert spec[key], key
    assert len(spec["shortDescription"]) <= 50  # krew-index's limit
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert spec["version"] == f"v{project['version']}"
    assert project["scripts"]["kubectl-coldstart"] == "remediator.coldstart.cli:main"
    launcher = (KREW / "kubectl-coldstart").read_text()
    assert f"version={project['version']}\n" in launcher
    (platform,) = spec["platforms"]
    assert platform["bin"] == "kubectl-coldstart"
    assert spec["version"] in platform["uri"]
    assert {f["from"] for f in platform["files"]} == {"kubectl-coldstart", "LICENSE.txt"}


def test_the_digest_is_the_archives() -> None:
    data = _build()
    doc = yaml.safe_load((KREW / "coldstart.yaml").read_text())
    (platform,) = doc["spec"]["platforms"]
    assert platform["sha256"] == hashlib.sha256(data).hexdigest()
    assert _build() == data  # reproducible: the same bytes every time
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        launcher = tar.getmember("kubectl-coldstart")
        assert launcher.mode == 0o755
        body = tar.extractfile(launcher)
        assert body is not None
        assert re.match(rb"#!/bin/sh\n", body.read())
