"""Tell on-call in Slack what remediator did, why, and how it ended: the one notifier.

One message per incident when it acts (or only notifies), then replies in that
message's thread as the workflow ends, so a channel shows one line per incident; dry-run
"would have" notes and "could not act" notes go to the channel. The wording of every
message lives here. Uses slack_sdk's AsyncWebClient; every call goes through `_call`,
which waits out a 429's Retry-After (capped and bounded). `carry(Tell)` answers Posted,
Unavailable (connection, timeout, 5xx, still rate limited) or Refused (anything else);
`acted`/`ended` raise SlackError instead.

Every message carries metadata naming its incident, action and kind of note. A Tell
with `unsure_since` (a post begun then whose answer was never stored) first looks for
that message in the channel (conversations.history, or conversations.replies in its
thread; scopes channels:history / groups:history, and a channel id) and answers its
ts without posting. chat.postMessage has no idempotency key, so this look is the only
way to know. When the look itself is refused (a missing scope, a channel given by
name), the message is posted again, marked as possibly repeated: a duplicate is
noise, a lost "acted" or end reply leaves on-call blind.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.executors.protocol import (
    Acted,
    Command,
    Ended,
    Finished,
    Note,
    Outcome,
    Posted,
    Refused,
    Spared,
    Submitted,
    Tell,
    Unavailable,
    WouldHave,
)
from remediator.executors.secrets import read_token
from remediator.logfields import get_logger

log = get_logger(__name__)

_THREADS_KEPT = 10_000
EVENT_TYPE = "remediator_note"  # the metadata event type of every message posted
_LOOK_BACK_S = 300.0  # our clock and Slack's agree to well within this
_PAGES = 5  # pages of 200 messages looked through for an interrupted post
_REPEAT = "Re-sent after an interrupted post: it may repeat an earlier message."
_END_ICON = {"Succeeded": ":white_check_mark:", "Failed": ":x:", "Error": ":warning:"}


class SlackError(RuntimeError):
    """Slack refused the message (bad token, unknown channel, still rate limited)."""

    def __init__(self, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.retry = retry  # a later attempt may succeed (connection, 5xx, 429)


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
    """Slack's "Escaping text": & < > as entities, so no text from outside (pod names,
    reasons, GPU verdicts, workflow messages) becomes a mention (`<!channel>`, `<@U…>`) or
    a link. Every mrkdwn text and the fallback text go through here or `_link`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    """`<url|label>`, the one control sequence we write: the URL percent-encoded where it
    could end the link (`<`, `>`, `|`, spaces), its & as an entity; the label escaped."""
    if not url:
        return _esc(label)
    safe_url = quote(url, safe=":/?#[]@!$&'()*+,;=%~").replace("&", "&amp;")
    return f"<{safe_url}|{_esc(label)}>"


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters, never ending in half an entity (`&am`)."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    amp = cut.rfind("&", max(0, len(cut) - 5))
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown duration"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def act_blocks(d: Decision, submitted: Submitted | None) -> list[dict[str, Any]]:
    """The first message: what, where, why, which incident, which workflow."""
    verb = "Remediating" if action(d.action).acts else "Needs attention"
    if submitted is None:
        workflow = "none (notify only)"
    else:
        workflow = _link(submitted.url, submitted.name)
        if not submitted.created:
            workflow += " (already submitted)"
    at = datetime.fromtimestamp(d.at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": f"{verb}: {d.action} {d.where}"[:150]},
        },
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Action*\n{_esc(d.action)}"},
                {"type": "mrkdwn", "text": f"*Target*\n`{_esc(d.where)}`"},
                {"type": "mrkdwn", "text": f"*Incident*\n`{_esc(d.incident)}`"},
                {"type": "mrkdwn", "text": f"*Workflow*\n{workflow}"},
            ],
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(f"*Why*\n{_esc(d.reason)}", 3000)},
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"remediator · decided {at}"}]},
    ]


def end_blocks(ended: Ended) -> list[dict[str, Any]]:
    """The thread reply: how the workflow ended and how long it took."""
    icon = _END_ICON.get(ended.phase, ":grey_question:")
    took = _duration(ended.duration_s())
    line = _clip(f"{icon} Workflow `{_esc(ended.name)}` *{_esc(ended.phase)}* in {took}", 3000)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": line}}]
    if ended.message:
        text = _clip(f"> {_esc(ended.message)}", 3000)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text}})
    return blocks


def note_blocks(headline: str, d: Decision, detail: str) -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": {"type": "plain_text", "text": headline[:150]}},
        {
            "type": "section",
            "fields": [
                {"type": "mrkdwn", "text": f"*Action*\n{_esc(d.action)}"},
                {"type": "mrkdwn", "text": f"*Target*\n`{_esc(d.where)}`"},
                {"type": "mrkdwn", "text": f"*Incident*\n`{_esc(d.incident)}`"},
            ],
        },
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip(f"*Why*\n{_esc(d.reason)}", 3000)},
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(_esc(detail), 3000)}]},
    ]


def metadata(note: Note) -> dict[str, Any]:
    """What finds a message again: which incident, which action, which kind of note."""
    d = note.decision
    kind = type(note).__name__.lower()  # acted, finished, wouldhave, couldnot, spared
    payload = {"incident": d.incident, "action": d.action, "note": kind}
    return {"event_type": EVENT_TYPE, "event_payload": payload}


def message(note: Note) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text (mrkdwn too: the notification shows it, so it is escaped) and
    the blocks of each kind of note. Headers are plain_text: never parsed, never escaped."""
    d = note.decision
    if isinstance(note, Acted):
        text, blocks = f"{d.action} {d.where}: {d.reason}", act_blocks(d, note.submitted)
    elif isinstance(note, Finished):
        e = note.ended
        text = f"workflow {e.name} {e.phase} in {_duration(e.duration_s())}"
        blocks = end_blocks(e)
    elif isinstance(note, WouldHave):
        text = f"Dry run, would have: {d.action} {d.where}"
        blocks = note_blocks(text, d, f"not done: {note.reason}")
    elif isinstance(note, Spared):
        text = f"Spared: {d.action} {d.where} not done"
        blocks = note_blocks(text, d, f"looked at again just before acting: {note.reason}")
    else:
        text = f"Could not act: {d.action} {d.where}"
        blocks = note_blocks(text, d, note.error)
    return _clip(_esc(text), 3000), blocks


class SlackNotifier:
    """Posts on act and on end; keeps each incident's thread_ts to reply under it."""

    def __init__(
        self, config: SlackConfig, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        self._config = config
        self._sleep = sleep  # the runtime's clock, so a 429 waits on it
        token = read_token(config.token_env, config.token_file_env, config.token_file)
        # No retry handlers: slack_sdk's default one posts again after a dropped connection,
        # a duplicate whenever Slack had taken the message. Retries are ours (`_call`: 429;
        # the worker: the rest, after looking for the message).
        self._client = AsyncWebClient(
            token=token, base_url=config.base_url, timeout=config.timeout_s, retry_handlers=[]
        )
        self._threads: OrderedDict[str, str] = OrderedDict()
        self._channel_id: str | None = None  # as Slack answered a post: history needs an id

    def thread_of(self, incident: str) -> str | None:
        return self._threads.get(incident)

    async def carry(self, command: Command) -> Outcome:
        if not isinstance(command, Tell):
            return Refused(f"Slack carries Tell, not {type(command).__name__}")
        note, thread = command.note, command.thread
        try:
            repeat = False
            if command.unsure_since is not None:
                found, repeat = await self._look(note, thread, command.unsure_since)
                if found is not None:
                    return Posted(found)
            return Posted(await self.tell(note, thread, repeat=repeat))
        except SlackError as exc:
            return Unavailable(str(exc)) if exc.retry else Refused(str(exc))

    async def _look(self, note: Note, thread: str | None, since: float) -> tuple[str | None, bool]:
        """(the ts of this note posted since `since`, or None; whether a new post may
        repeat one that could not be looked for)."""
        incident = note.decision.incident
        try:
            found = await self.find(note, thread, since)
        except SlackError as exc:
            if exc.retry:
                raise
            log.warning(
                "could not look for an interrupted slack post: posting again, it may repeat",
                extra={"incident": incident, "error": str(exc)},
            )
            return None, True
        if found is not None:
            log.info(
                "slack message of an interrupted post found: not posted again",
                extra={"incident": incident, "slack_ts": found},
            )
            if isinstance(note, Acted) and thread is None:
                self._remember(incident, found)
        return found, False

    async def find(self, note: Note, thread: str | None, since: float) -> str | None:
        """The ts of this note (by its metadata) posted at or after `since`, or None."""
        want = metadata(note)["event_payload"]
        incident = note.decision.incident
        threaded = isinstance(note, Acted | Finished)
        if threaded and thread is None:
            thread = self._threads.get(incident)
        args: dict[str, Any] = {
            "channel": self._channel_id or self._config.channel,
            "oldest": f"{since - _LOOK_BACK_S:.6f}",
            "include_all_metadata": True,
            "limit": 200,
        }
        for _ in range(_PAGES):
            if threaded and thread is not None:
                page = await self._call(
                    "conversations.replies",
                    lambda: self._client.conversations_replies(ts=thread, **args),
                    incident,
                )
            else:
                page = await self._call(
                    "conversations.history",
                    lambda: self._client.conversations_history(**args),
                    incident,
                )
            for msg in page.get("messages") or []:
                meta = msg.get("metadata") or {}
                if meta.get("event_type") == EVENT_TYPE and meta.get("event_payload") == want:
                    return str(msg["ts"])
            args["cursor"] = (page.get("response_metadata") or {}).get("next_cursor")
            if not args["cursor"]:
                return None
        return None

    async def acted(self, decision: Decision, submitted: Submitted | None = None) -> str:
        """Post (or, for a repeat of the incident, reply) about an action taken."""
        return await self.tell(Acted(decision, submitted))

    async def ended(self, incident: str, ended: Ended, decision: Decision | None = None) -> str:
        """Reply in the incident's thread with the workflow's end phase."""
        d = decision or Decision("notify", "", ended.name, "", incident, 0.0)
        return await self.tell(Finished(d, ended))

    async def tell(self, note: Note, thread: str | None = None, repeat: bool = False) -> str:
        """Post a note. Acts and ends go in the incident's thread (the one given, else the
        one this process posted); an end other than Succeeded is also broadcast to the
        channel, since someone has to look. Dry-run and could-not notes stand alone."""
        incident = note.decision.incident
        threaded = isinstance(note, Acted | Finished)
        if threaded and thread is None:
            thread = self._threads.get(incident)
        text, blocks = message(note)
        if repeat:
            blocks = [
                *blocks,
                {"type": "context", "elements": [{"type": "mrkdwn", "text": _REPEAT}]},
            ]
        kwargs: dict[str, Any] = {
            "channel": self._config.channel,
            "text": text,
            "blocks": blocks,
            "metadata": metadata(note),
        }
        if threaded and thread is not None:
            broadcast = isinstance(note, Finished) and note.ended.phase != "Succeeded"
            kwargs.update(thread_ts=thread, reply_broadcast=broadcast)
        response = await self._call(
            "chat.postMessage", lambda: self._client.chat_postMessage(**kwargs), incident
        )
        ts = str(response["ts"])
        self._channel_id = str(response.get("channel") or "") or self._channel_id
        if threaded and thread is None:
            self._remember(incident, ts)
        # `slack_ts`, not `ts`: the log line's own timestamp is `ts`.
        log.info("slack message posted", extra={"incident": incident, "slack_ts": ts})
        return ts

    async def _call(self, method: str, call: Callable[[], Awaitable[Any]], incident: str) -> Any:
        """The one place a Slack call can fail: every failure class becomes a SlackError."""
        for attempt in range(self._config.rate_limit_retries + 1):
            try:
                return await call()
            except SlackApiError as err:
                status = err.response.status_code
                code = err.response.get("error", "unknown_error")
                last = attempt == self._config.rate_limit_retries
                if status != 429 or last:
                    retry = status == 429 or status >= 500
                    why = f"Slack refused {method}: {code} ({status})"
                    raise SlackError(why, retry=retry) from None
                delay = self._retry_after(err.response.headers)
                log.warning(
                    "slack rate limited, waiting",
                    extra={"incident": incident, "retry_after_s": delay},
                )
                await self._sleep(delay)
            except (aiohttp.ClientError, TimeoutError, OSError) as err:
                why = f"Slack unreachable: {type(err).__name__}: {err}"[:300]
                raise SlackError(why, retry=True) from None
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
