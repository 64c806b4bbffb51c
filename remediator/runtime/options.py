"""The click options `remediator serve` and `remediator worker` share: one definition each
(name, env var, type, default), so the two commands cannot drift apart. The help text is
the caller's where the two commands act differently on the same flag."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class Decorator(Protocol):
    """An option decorator: gives back the command function it was given, type and all."""

    def __call__(self, fn: F, /) -> F: ...


def argo_server_option(help: str) -> Decorator:
    return click.option("--argo-server", envvar="ARGO_SERVER", default=None, help=help)


def argo_namespace_option(help: str | None = None) -> Decorator:
    return click.option(
        "--argo-namespace", envvar="ARGO_NAMESPACE", default="argo", show_default=True, help=help
    )


def slack_channel_option(help: str) -> Decorator:
    return click.option("--slack-channel", envvar="SLACK_CHANNEL", default=None, help=help)


def slack_api_url_option(fn: F) -> F:
    return click.option(
        "--slack-api-url",
        envvar="SLACK_API_URL",
        default="https://slack.com/api/",
        show_default=True,
        help="Slack Web API base URL (an egress proxy, or a test server).  [env SLACK_API_URL]",
    )(fn)


def kubeconfig_option(help: str) -> Decorator:
    return click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help=help)


def outbox_retention_option(help: str) -> Decorator:
    """Days (a float above 0) a closed row is kept; the command turns it into seconds."""
    return click.option(
        "--outbox-retention",
        envvar="REMEDIATOR_OUTBOX_RETENTION",
        type=click.FloatRange(min=0, min_open=True),
        default=7.0,
        show_default=True,
        help=help,
    )


def workflow_start_timeout_option(help: str) -> Decorator:
    return click.option(
        "--workflow-start-timeout",
        envvar="REMEDIATOR_WORKFLOW_START_TIMEOUT",
        type=click.FloatRange(min=0, min_open=True),
        default=300.0,
        show_default=True,
        help=help,
    )
