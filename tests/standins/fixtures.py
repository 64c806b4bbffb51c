"""The stand-in Argo and Slack as pytest fixtures, defined once; each suite names its token.

In a conftest or test module: `argo = argo_fixture(TOKEN)`, `slack = slack_fixture(TOKEN, ...)`.
Each test gets a server of its own (unless `scope` says otherwise), on 127.0.0.1, stopped after.
`slack_config` points the real notifier (slack_sdk) at the Slack stand-in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from remediator.executors.slack import SlackConfig
from tests.standins.argo_server import ArgoStandin
from tests.standins.slack_server import SlackStandin

Scope = Literal["function", "module"]


def argo_fixture(token: str) -> Any:
    """A fixture `argo`: the Argo Server stand-in, accepting `token`."""

    @pytest.fixture
    def argo() -> Iterator[ArgoStandin]:
        with ArgoStandin(token=token) as server:
            yield server

    return argo


def slack_fixture(
    token: str,
    channels: frozenset[str] | None = None,
    *,
    scope: Scope = "function",
    token_env: bool = False,
) -> Any:
    """A fixture `slack`: the Slack Web API stand-in, accepting `token`, knowing `channels`
    (else its default); with `token_env`, SLACK_BOT_TOKEN is set to `token` for the test."""
    kwargs: dict[str, Any] = {} if channels is None else {"channels": channels}

    def serve() -> Iterator[SlackStandin]:
        with SlackStandin(token=token, **kwargs) as server:
            yield server

    if not token_env:
        return pytest.fixture(scope=scope, name="slack")(serve)

    def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[SlackStandin]:
        monkeypatch.setenv("SLACK_BOT_TOKEN", token)
        yield from serve()

    return pytest.fixture(scope=scope)(slack)


def slack_config(
    slack: SlackStandin, token_file: Path, channel: str, token: str | None = None, **settings: Any
) -> SlackConfig:
    """The notifier's config against the stand-in: the token (the stand-in's own unless
    `token` says otherwise) written to `token_file` and read from there, never from the
    environment; `settings` are SlackConfig's other fields."""
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(slack.token if token is None else token)
    return SlackConfig(
        channel=channel,
        base_url=slack.url,
        token_env="REMEDIATOR_TEST_UNSET_SLACK_TOKEN",
        token_file=str(token_file),
        **settings,
    )
