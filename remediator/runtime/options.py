"""The click options `remediator serve`, `worker` and `ingest` share: one definition each
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


def argo_server(help: str) -> Decorator:
    return click.option("--argo-server", envvar="ARGO_SERVER", default=None, help=help)


def argo_namespace(help: str | None = None) -> Decorator:
    return click.option(
        "--argo-namespace", envvar="ARGO_NAMESPACE", default="argo", show_default=True, help=help
    )


def slack_channel(help: str) -> Decorator:
    return click.option("--slack-channel", envvar="SLACK_CHANNEL", default=None, help=help)


def slack_api_url(fn: F) -> F:
    return click.option(
        "--slack-api-url",
        envvar="SLACK_API_URL",
        default="https://slack.com/api/",
        show_default=True,
        help="Slack Web API base URL (an egress proxy, or a test server).  [env SLACK_API_URL]",
    )(fn)


def _namespaces(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    return tuple(ns.strip() for ns in (value or "").split(",") if ns.strip())


def namespaces(help: str) -> Decorator:
    """Comma-separated namespaces to list+watch, as a tuple (empty: no watch)."""
    return click.option(
        "--namespaces",
        envvar="REMEDIATOR_INFERENCE_NAMESPACES",
        default="",
        callback=_namespaces,
        help=help,
    )


def warmup_daemonset(fn: F) -> F:
    return click.option(
        "--warmup-daemonset",
        envvar="REMEDIATOR_WARMUP_DAEMONSET",
        default="kube-system/gpu-warmup",
        show_default=True,
        help="NAMESPACE/NAME of the GPU warmup DaemonSet to watch (by name); '' for none.  "
        "[env REMEDIATOR_WARMUP_DAEMONSET]",
    )(fn)


def kill_switch_file(help: str) -> Decorator:
    return click.option(
        "--kill-switch-file", envvar="REMEDIATOR_KILL_SWITCH_FILE", default=None, help=help
    )


def kubeconfig(help: str) -> Decorator:
    return click.option("--kubeconfig", envvar="KUBECONFIG", default=None, help=help)


def outbox_retention(help: str) -> Decorator:
    """Days a closed row is kept; the command turns them into seconds."""
    return above_zero("--outbox-retention", "REMEDIATOR_OUTBOX_RETENTION", 7.0, help)


def workflow_start_timeout(help: str) -> Decorator:
    return above_zero("--workflow-start-timeout", "REMEDIATOR_WORKFLOW_START_TIMEOUT", 300.0, help)


def above_zero(flag: str, envvar: str, default: float, help: str) -> Decorator:
    """A number above 0 (seconds, days) with its default shown."""
    return click.option(
        flag,
        envvar=envvar,
        type=click.FloatRange(min=0, min_open=True),
        default=default,
        show_default=True,
        help=help,
    )
