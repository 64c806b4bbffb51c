"""Tell on-call in Slack what remediator did, why, and how it ended.

One message per incident when it acts (or only notifies), then replies in that
message's thread as the workflow ends, so a channel shows one line per incident.
Uses slack_sdk's AsyncWebClient; a 429 is retried after its Retry-After (capped
and bounded), anything else Slack refuses is raised as SlackError.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from remediator.executors.argo import Ended, Submitted
from remediator.executors.secrets import read_token
from remediator.logfields import get_logger
from remediator.policy.decision import Decision

log = get_logger(__name__)

_THREADS_KEPT = 10_000
_END_ICON = {"Succeeded": ":white_check_mark:", "Failed": ":x:", "Error": ":warning:"}


class SlackError(RuntimeError):
    """Slack refused the message (bad token, unknown channel, still rate limited)."""


@dataclass(frozen=True, slots=True)
class SlackConfig:
    channel: str  # channel id, e.g. C0123456789
    base_url: str = "https://slack.com/api/"
    token_env: str = "SLACK_BOT_TOKEN"
    token_file_env: str = "SLACK_BOT_TOKEN_FILE"
    token_file: str | None = None
    rate_limit_retries: int = 2
    max_retry_after_s: float = 60.0  # never sleep longer than this on one 429
    timeout_s: int = 10


def _esc(text: str) -> str:
    """Slack mrkdwn control characters; user-derived text must not become markup."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _target(d: Decision) -> str:
    return d.target if d.action == "cordon-node" or not d.namespace else f"{d.namespace}/{d.target}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown duration"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def act_blocks(d: Decision, submitted: Submitted | None) -> list[dict[str, Any]]:
    """The first message: what, where, why, which incident, which workflow."""
    verb = "Remediating" if d.action != "notify" else "Needs attention"
    if submitted is None:
        workflow = "none (notify only)"
    else:
        workflow = f"<{submitted.url}|{_esc(submitted.name)}>"
        if not submitted.created:
            workflow += " (already submitted)"
    at = datetime.fromtimestamp(d.at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": f"{verb}: {d.action} {_target(d)}"[:150]},
        },
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Action*\n{_esc(d.action)}"},
                {"type": "mrkdwn", "text": f"*Target*\n`{_esc(_target(d))}`"},
                {"type": "mrkdwn", "text": f"*Incident*\n`{_esc(d.incident)}`"},
                {"type": "mrkdwn", "text": f"*Workflow*\n{workflow}"},
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Why*\n{_esc(d.reason)}"[:3000]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"remediator · decided {at}"}]},
    ]


def end_blocks(ended: Ended) -> list[dict[str, Any]]:
    """The thread reply: how the workflow ended and how long it took."""
    icon = _END_ICON.get(ended.phase, ":grey_question:")
    line = (
        f"{icon} Workflow `{_esc(ended.name)}` *{ended.phase}* in {_duration(ended.duration_s())}"
    )
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]
    if ended.message:
        text = f"> {_esc(ended.message)}"[:3000]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    return blocks


class SlackNotifier:
    """Posts on act and on end; keeps each incident's thread_ts to reply under it."""

    def __init__(self, config: SlackConfig) -> None:
        self._config = config
        token = read_token(config.token_env, config.token_file_env, config.token_file)
        self._client = AsyncWebClient(
            token=token, base_url=config.base_url, timeout=config.timeout_s
        )
        self._threads: OrderedDict[str, str] = OrderedDict()

    def thread_of(self, incident: str) -> str | None:
        return self._threads.get(incident)

    async def acted(self, decision: Decision, submitted: Submitted | None = None) -> str:
        """Post (or, for a repeat of the incident, reply) about an action taken."""
        text = f"{decision.action} {_target(decision)}: {decision.reason}"
        return await self._post(decision.incident, text, act_blocks(decision, submitted))

    async def ended(self, incident: str, ended: Ended) -> str:
        """Reply in the incident's thread with the workflow's end phase; failures
        are also broadcast to the channel, since someone has to look."""
        text = f"workflow {ended.name} {ended.phase} in {_duration(ended.duration_s())}"
        broadcast = ended.phase != "Succeeded"
        return await self._post(incident, text, end_blocks(ended), broadcast=broadcast)

    async def _post(
        self, incident: str, text: str, blocks: list[dict[str, Any]], *, broadcast: bool = False
    ) -> str:
        thread_ts = self._threads.get(incident)
        kwargs: dict[str, Any] = {"channel": self._config.channel, "text": text, "blocks": blocks}
        if thread_ts is not None:
            kwargs.update(thread_ts=thread_ts, reply_broadcast=broadcast)
        response = await self._send(kwargs, incident)
        ts = str(response["ts"])
        if thread_ts is None:
            self._remember(incident, ts)
        log.info("slack message posted", extra={"incident": incident, "slack_ts": ts})
        return ts

    async def _send(self, kwargs: dict[str, Any], incident: str) -> Any:
        for attempt in range(self._config.rate_limit_retries + 1):
            try:
                return await self._client.chat_postMessage(**kwargs)
            except SlackApiError as err:
                status = err.response.status_code
                code = err.response.get("error", "unknown_error")
                if status != 429 or attempt == self._config.rate_limit_retries:
                    raise SlackError(f"Slack refused chat.postMessage: {code} ({status})") from None
                delay = self._retry_after(err.response.headers)
                log.warning(
                    "slack rate limited, waiting",
                    extra={"incident": incident, "retry_after_s": delay},
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _retry_after(self, headers: Any) -> float:
        for key, value in dict(headers or {}).items():
            if key.lower() == "retry-after":
                raw = value[0] if isinstance(value, list) else value
                try:
                    return min(max(float(raw), 0.0), self._config.max_retry_after_s)
                except ValueError:
                    break
        return 1.0  # Slack always sends it; be polite if it did not

    def _remember(self, incident: str, ts: str) -> None:
        self._threads[incident] = ts
        while len(self._threads) > _THREADS_KEPT:
            self._threads.popitem(last=False)
