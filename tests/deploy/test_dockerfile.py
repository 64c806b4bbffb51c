"""The project Dockerfile passes the checker, and the checker catches each fault."""

from __future__ import annotations

import pytest

from tests.deploy import support as s
from tests.deploy.dockerlint import lint

DOCKERFILE = s.REPO / "Dockerfile"

GOOD = """\
FROM python:3.11.11-slim-bookworm AS build
RUN pip install .
FROM python:3.11.11-slim-bookworm
COPY --from=build /opt/venv /opt/venv
USER 10001
# HEALTHCHECK NONE: Kubernetes probes the service itself.
HEALTHCHECK NONE
"""


def test_project_dockerfile_passes() -> None:
    assert lint(DOCKERFILE.read_text()) == []


def test_project_dockerfile_runs_the_cli_and_serves_8080() -> None:
    text = DOCKERFILE.read_text()
    assert 'ENTRYPOINT ["remediator"]' in text and "EXPOSE 8080" in text


def test_minimal_good_dockerfile_passes() -> None:
    assert lint(GOOD) == []


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("FROM python:3.11.11-slim-bookworm AS build\nRUN pip install .\n", "", "multi-stage"),
        ("COPY --from=build /opt/venv /opt/venv", "COPY . /app", "multi-stage"),
        ("USER 10001\n", "", "non-root"),
        ("USER 10001", "USER root", "non-root"),
        ("USER 10001", "USER 0:0", "non-root"),
        ("FROM python:3.11.11-slim-bookworm\n", "FROM python:latest\n", "pinned-base"),
        ("FROM python:3.11.11-slim-bookworm\n", "FROM python\n", "pinned-base"),
        ("FROM python:3.11.11-slim-bookworm\n", "FROM python:3-slim\n", "pinned-base"),
        ("# HEALTHCHECK NONE: Kubernetes probes the service itself.\n", "", "healthcheck"),
        ("HEALTHCHECK NONE\n", "", "healthcheck"),
        ("USER 10001", "USER 10001\nENV SLACK_BOT_TOKEN=abc", "no-secrets"),
        ("USER 10001", "USER 10001\nARG ARGO_TOKEN", "no-secrets"),
        ("USER 10001", "USER 10001\nCOPY .env /app/.env", "no-secrets"),
        ("USER 10001", "USER 10001\nRUN curl -H 'x: xoxb-1234-abcd' example.invalid", "no-secrets"),
        ("USER 10001", "USER 10001\nADD https://example.invalid/x.tgz /x", "no-remote-add"),
    ],
)
def test_checker_catches(old: str, new: str, rule: str) -> None:
    assert old in GOOD
    problems = lint(GOOD.replace(old, new, 1))
    assert any(p.startswith(rule + ":") for p in problems), problems


def test_digest_pinned_base_passes() -> None:
    digest = "python:3.11-slim@sha256:" + "a" * 64
    assert lint(GOOD.replace("python:3.11.11-slim-bookworm", digest)) == []


def test_dockerignore_keeps_the_context_to_the_package() -> None:
    lines = (s.REPO / ".dockerignore").read_text().splitlines()
    assert "**" in lines  # allow-list: everything else (.git, .venv, tests) stays out
    assert {"!pyproject.toml", "!setup.py", "!README.md", "!remediator/"} <= set(lines)
    assert {"**/.env", "**/*.pem", "**/*.key"} <= set(lines)
