"""Slack notes the executors' notifier has no message for: what a dry run would have
done, a decision that could not be carried out, and a workflow's end replied under an
act message that an earlier process posted (its thread ts comes from the outbox).
Same channel, same token."""

from __future__ import annotations

from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from remediator.executors.argo import Ended
from remediator.executors.secrets import read_token
from remediator.executors.slack import SlackConfig, SlackError, end_blocks
from remediator.logfields import get_logger
from remediator.policy.decision import Decision

log = get_logger(__name__)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def note_blocks(headline: str, d: Decision, detail: str) -> list[dict[str, Any]]:
    target = f"{d.namespace}/{d.target}" if d.namespace else d.target
    return [
        {"type": "header", "text": {"type": "plain_text", "text": headline[:150]}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Action*\n{_esc(d.action)}"},
                {"type": "mrkdwn", "text": f"*Target*\n`{_esc(target)}`"},
                {"type": "mrkdwn", "text": f"*Incident*\n`{_esc(d.incident)}`"},
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Why*\n{_esc(d.reason)}"[:3000]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _esc(detail)[:3000]}]},
    ]


class Notes:
    def __init__(self, config: SlackConfig) -> None:
        self._channel = config.channel
        token = read_token(config.token_env, config.token_file_env, config.token_file)
        self._client = AsyncWebClient(
            token=token, base_url=config.base_url, timeout=config.timeout_s
        )

    async def would_have(self, d: Decision, guardrail_reason: str) -> None:
        target = f"{d.namespace}/{d.target}" if d.namespace else d.target
        headline = f"Dry run, would have: {d.action} {target}"
        await self._post(d, headline, f"not done: {guardrail_reason}")

    async def could_not(self, d: Decision, error: str) -> None:
        target = f"{d.namespace}/{d.target}" if d.namespace else d.target
        await self._post(d, f"Could not act: {d.action} {target}", error)

    async def ended_in(self, thread_ts: str, d: Decision, ended: Ended) -> None:
        """The end of a workflow, in the thread of the act message stored in the outbox;
        broadcast to the channel unless it succeeded, as the notifier does."""
        text = f"workflow {ended.name} {ended.phase}"
        await self._send(
            d,
            text,
            channel=self._channel,
            text=text,
            blocks=end_blocks(ended),
            thread_ts=thread_ts,
            reply_broadcast=ended.phase != "Succeeded",
        )

    async def _post(self, d: Decision, headline: str, detail: str) -> None:
        blocks = note_blocks(headline, d, detail)
        await self._send(d, headline, channel=self._channel, text=headline, blocks=blocks)

    async def _send(self, d: Decision, headline: str, **kwargs: Any) -> None:
        try:
            await self._client.chat_postMessage(**kwargs)
        except SlackApiError as err:
            code = err.response.get("error", "unknown_error")
            raise SlackError(f"Slack refused chat.postMessage: {code}") from None
        log.info("slack note posted", extra={"incident": d.incident, "headline": headline})
