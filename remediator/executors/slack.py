"""Tell on-call in Slack what remediator did, why, and how it ended: the one notifier.

One message per incident when it acts (or only notifies), then replies in that
message's thread as the workflow ends, so a channel shows one line per incident; dry-run
"would have" notes and "could not act" notes go to the channel. The wording of every
message lives here. Uses slack_sdk's AsyncWebClient; every call goes through `_call`,
which turns every way a call can fail into a SlackError with its class (`cause`).

`carry(Tell)` answers Posted, Unavailable or Refused and never raises, whatever comes
back. A transient failure is tried again, after the 429's Retry-After or a doubling
pause, until `retries` or `retry_deadline_s` run out, then answered Unavailable: Slack's
own transient `ok: false` errors (internal_error, fatal_error, service_unavailable,
request_timeout, ratelimited, all with HTTP 200), 429, 5xx, an answer that is not
Slack's (a proxy's HTML page), JSON cut off, a timeout, a dropped connection. Where the
post may have gone through all the same (fatal_error, internal_error, 5xx, a cut-off or
late answer, a dropped connection), the next try looks for it first, as below. Any
other `ok: false` (invalid_auth, channel_not_found, invalid_blocks, ...) is Refused at
once: trying again cannot help. `acted`/`ended` raise SlackError instead.

An end told with no act message to reply under (it was refused, or never got through)
says itself what was done, to what, why and under which incident.

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
import time
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
    NotStarted,
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
# Slack's `ok: false` errors that a later try can get past (docs.slack.dev, "Errors" of
# chat.postMessage and conversations.history); the first two may have done part of the work.
_TRANSIENT = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)
_MAYBE_DONE = frozenset({"internal_error", "fatal_error"})


class SlackError(RuntimeError):
    """A Slack call failed. `retry`: a later try may get through; `cause`: its class, a
    fixed word (ratelimited, slack_error, server_error, not_slack, cut_off, bad_answer,
    timeout, connection, refused); `unsure`: the post may have gone through all the same;
    `wait_s`: what Slack asked us to wait (Retry-After)."""

    def __init__(
        self,
        message: str,
        retry: bool = False,
        cause: str = "refused",
        unsure: bool = False,
        wait_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retry = retry
        self.cause = cause
        self.unsure = unsure
        self.wait_s = wait_s


@dataclass(frozen=True, slots=True)
class SlackConfig:
    channel: str  # channel id, e.g. C0123456789
    base_url: str = "https://slack.com/api/"
    token_env: str = "SLACK_BOT_TOKEN"
    token_file_env: str = "SLACK_BOT_TOKEN_FILE"
    token_file: str | None = None
    retries: int = 4  # tries after the first, for a transient failure of any class
    retry_deadline_s: float = 30.0  # no try starts later than this after the first
    retry_initial_s: float = 1.0  # the pause after a failure with no Retry-After; doubles
    retry_max_s: float = 8.0
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
    kind = type(note).__name__.lower()  # acted, finished, wouldhave, couldnot, notstarted, spared
    payload = {"incident": d.incident, "action": d.action, "note": kind}
    return {"event_type": EVENT_TYPE, "event_payload": payload}


def alone_end_blocks(d: Decision, ended: Ended) -> list[dict[str, Any]]:
    """An end with no act message to reply under: what was done, to what, why, which
    incident, then how it ended."""
    headline = f"Workflow {ended.phase}: {d.action} {d.where}"
    blocks = note_blocks(headline, d, f"workflow {ended.name}; no act message was posted")
    workflow = {"type": "mrkdwn", "text": f"*Workflow*\n{_link(ended.url, ended.name)}"}
    blocks[1]["fields"].append(workflow)
    return blocks[:3] + end_blocks(ended) + blocks[3:]


def _threaded(note: Note, thread: str | None) -> bool:
    """Acts, ends and "not started" notes go in the incident's thread; a spared delete
    only where it is given one (a pod on a node found unsettled: the node's)."""
    return isinstance(note, Acted | Finished | NotStarted) or (
        thread is not None and isinstance(note, Spared)
    )


def message(note: Note, threaded: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text (mrkdwn too: the notification shows it, so it is escaped) and
    the blocks of each kind of note. Headers are plain_text: never parsed, never escaped.
    An end not `threaded` (no act message to reply under) carries the act's context."""
    d = note.decision
    if isinstance(note, Acted):
        text, blocks = f"{d.action} {d.where}: {d.reason}", act_blocks(d, note.submitted)
    elif isinstance(note, Finished):
        e = note.ended
        text = f"workflow {e.name} {e.phase} in {_duration(e.duration_s())}"
        blocks = end_blocks(e)
        if not threaded:
            text = f"{d.action} {d.where} ({d.incident}): {text}"
            blocks = alone_end_blocks(d, e)
    elif isinstance(note, NotStarted):
        text = f"Workflow not started: {d.action} {d.where}"
        waited = _duration(note.waited_s)
        detail = f"workflow {note.workflow} still {note.phase} {waited} after it was submitted"
        blocks = note_blocks(text, d, f"{detail}; still followed to its end")
        link = {"type": "mrkdwn", "text": f"*Workflow*\n{_link(note.url, note.workflow)}"}
        blocks[1]["fields"].append(link)
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
        self,
        config: SlackConfig,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._sleep = sleep  # the runtime's clock, so a retry waits on it
        self._monotonic = monotonic  # the retry deadline
        self._now = now  # wall time, as Slack's ts are: since when to look for a post
        token = read_token(config.token_env, config.token_file_env, config.token_file)
        # No retry handlers: slack_sdk's default one posts again after a dropped connection,
        # a duplicate whenever Slack had taken the message. Retries are ours (`carry`, which
        # looks for the message first where it may have gone through; then the worker).
        self._client = AsyncWebClient(
            token=token, base_url=config.base_url, timeout=config.timeout_s, retry_handlers=[]
        )
        self._threads: OrderedDict[str, str] = OrderedDict()
        self._channel_id: str | None = None  # as Slack answered a post: history needs an id

    def thread_of(self, incident: str) -> str | None:
        return self._threads.get(incident)

    async def carry(self, command: Command) -> Outcome:
        """Tell, trying a transient failure again until the tries or the deadline run out.
        Never raises: Posted, Unavailable or Refused, each failure with its `cause`."""
        if not isinstance(command, Tell):
            return Refused(f"Slack carries Tell, not {type(command).__name__}", "refused")
        c, incident = self._config, command.note.decision.incident
        deadline = self._monotonic() + c.retry_deadline_s
        unsure, pause = command.unsure_since, c.retry_initial_s
        for attempt in range(c.retries + 1):
            begun = self._now()
            try:
                return Posted(await self._once(command.note, command.thread, unsure))
            except SlackError as exc:
                err = exc
            if not err.retry:
                return Refused(str(err), err.cause)
            if err.unsure and unsure is None:
                unsure = begun  # it may have gone through: the next try looks for it first
            wait = min(pause, c.retry_max_s) if err.wait_s is None else err.wait_s
            pause *= 2
            if attempt == c.retries or self._monotonic() + wait > deadline:
                break
            log.warning(
                "slack call failed, retrying",
                extra={"incident": incident, "cause": err.cause, "error": str(err)[:300],
                       "retry_in_s": wait, "attempt": attempt + 1},
            )  # fmt: skip
            await self._sleep(wait)
        return Unavailable(str(err), cause=err.cause)

    async def _once(self, note: Note, thread: str | None, unsure_since: float | None) -> str:
        """One try: look for an earlier post of this note where one may have gone through,
        else post it. The one place a failure is turned into a SlackError whatever it is."""
        try:
            repeat = False
            if unsure_since is not None:
                found, repeat = await self._look(note, thread, unsure_since)
                if found is not None:
                    return found
            return await self.tell(note, thread, repeat=repeat)
        except SlackError:
            raise
        except Exception as exc:  # an answer nobody foresaw must not reach the runtime
            log.warning(
                "slack answer not understood",
                extra={"incident": note.decision.incident, "error": repr(exc)[:300]},
                exc_info=True,
            )
            why = f"Slack's answer could not be read: {type(exc).__name__}: {exc}"[:300]
            raise SlackError(why, retry=True, cause="bad_answer", unsure=True) from None

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
        threaded = _threaded(note, thread)
        if threaded and thread is None:
            thread = self._threads.get(incident)
        args: dict[str, Any] = {
            "channel": self._channel_id or self._config.channel,
            "oldest": f"{since - _LOOK_BACK_S:.6f}",
            "include_all_metadata": True,
            "limit": 200,
        }
        for _ in range(_PAGES):
            page: Any
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
            data = _data(page, "conversations.history")
            found = _find(data.get("messages"), want)
            if found is not None:
                return found
            more = data.get("response_metadata")
            args["cursor"] = more.get("next_cursor") if isinstance(more, dict) else None
            if not args["cursor"] or not isinstance(args["cursor"], str):
                return None
        return None

    async def acted(self, decision: Decision, submitted: Submitted | None = None) -> str:
        """Post (or, for a repeat of the incident, reply) about an action taken."""
        return _ts(await self.carry(Tell(Acted(decision, submitted))))

    async def ended(self, incident: str, ended: Ended, decision: Decision | None = None) -> str:
        """Reply in the incident's thread with the workflow's end phase."""
        d = decision or Decision("notify", "", ended.name, "", incident, 0.0)
        return _ts(await self.carry(Tell(Finished(d, ended))))

    async def tell(self, note: Note, thread: str | None = None, repeat: bool = False) -> str:
        """Post a note. Acts, ends and "not started" notes go in the incident's thread (the
        one given, else the one this process posted); an end other than Succeeded and a
        workflow not started are also broadcast to the channel, since someone has to look.
        A spared delete goes in the thread given, if any. Dry-run and could-not notes stand
        alone."""
        incident = note.decision.incident
        threaded = _threaded(note, thread)
        if threaded and thread is None:
            thread = self._threads.get(incident)
        text, blocks = message(note, threaded=not threaded or thread is not None)
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
            # an end other than Succeeded, or a workflow that never started: someone must look
            broadcast = isinstance(note, NotStarted) or (
                isinstance(note, Finished) and note.ended.phase != "Succeeded"
            )
            kwargs.update(thread_ts=thread, reply_broadcast=broadcast)
        response = await self._call(
            "chat.postMessage", lambda: self._client.chat_postMessage(**kwargs), incident
        )
        data = _data(response, "chat.postMessage")
        ts, channel = data.get("ts"), data.get("channel")
        if not isinstance(ts, str) or not ts:  # "ok" and no ts: it may well have gone through
            why = "Slack answered chat.postMessage ok without a ts"
            raise SlackError(why, retry=True, cause="bad_answer", unsure=True)
        self._channel_id = channel if isinstance(channel, str) and channel else self._channel_id
        if isinstance(note, Acted) and thread is None:
            self._remember(incident, ts)
        # `slack_ts`, not `ts`: the log line's own timestamp is `ts`.
        log.info("slack message posted", extra={"incident": incident, "slack_ts": ts})
        return ts

    async def _call(self, method: str, call: Callable[[], Awaitable[Any]], incident: str) -> Any:
        """The one place a Slack call can fail: every failure class becomes a SlackError.
        Tries once; `carry` decides whether to try again."""
        try:
            return await call()
        except SlackApiError as err:
            raise self._classified(method, err) from None
        except aiohttp.ClientConnectorError as err:  # never connected: nothing was sent
            why = f"Slack unreachable: {type(err).__name__}: {err}"[:300]
            raise SlackError(why, retry=True, cause="connection") from None
        except TimeoutError:
            why = f"Slack did not answer {method} in {self._config.timeout_s}s"
            raise SlackError(why, retry=True, cause="timeout", unsure=True) from None
        except (aiohttp.ClientError, OSError) as err:
            why = f"Slack connection lost: {type(err).__name__}: {err}"[:300]
            raise SlackError(why, retry=True, cause="connection", unsure=True) from None

    def _classified(self, method: str, err: SlackApiError) -> SlackError:
        """What a SlackApiError means. slack_sdk raises it for any answer that is not
        `ok`, handing over aiohttp's own response (no status_code) when the body could not
        be read as JSON (cut off)."""
        response = err.response
        status = getattr(response, "status_code", None)
        if not isinstance(status, int):
            why = f"Slack's answer to {method} was cut off or unreadable"
            return SlackError(why, retry=True, cause="cut_off", unsure=True)
        data = getattr(response, "data", None)
        code = data.get("error") if isinstance(data, dict) else None
        code = code if isinstance(code, str) else None
        why = f"Slack refused {method}: {code or 'no Slack error in the answer'} ({status})"[:300]
        if status == 429 or code == "ratelimited":
            wait = self._retry_after(getattr(response, "headers", None), status == 429)
            return SlackError(why, retry=True, cause="ratelimited", wait_s=wait)
        if status >= 500 or status == 408:
            return SlackError(why, retry=True, cause="server_error", unsure=True)
        if code in _TRANSIENT:
            return SlackError(why, retry=True, cause="slack_error", unsure=code in _MAYBE_DONE)
        if code is None and status == 200:  # not Slack's answer: a proxy's page, say
            why = f"Slack's answer to {method} was not Slack's (HTTP 200, no ok, no error)"
            return SlackError(why, retry=True, cause="not_slack", unsure=True)
        return SlackError(why, retry=False, cause="refused")

    def _retry_after(self, headers: Any, required: bool) -> float | None:
        """The Retry-After asked for (capped); without one, 1 s for a 429 (Slack always
        sends it: be polite) and our own pause for an `ok: false` ratelimited."""
        try:
            items = list(dict(headers or {}).items())
        except (TypeError, ValueError):
            items = []
        for key, value in items:
            if str(key).lower() == "retry-after":
                raw = value[0] if isinstance(value, list) else value
                try:
                    return min(max(float(raw), 0.0), self._config.max_retry_after_s)
                except (TypeError, ValueError):
                    break
        return 1.0 if required else None

    def _remember(self, incident: str, ts: str) -> None:
        self._threads[incident] = ts
        while len(self._threads) > _THREADS_KEPT:
            self._threads.popitem(last=False)


def _data(response: Any, method: str) -> dict[str, Any]:
    """The answer's JSON object; anything else is an answer we cannot read."""
    data = getattr(response, "data", None)
    if not isinstance(data, dict):
        why = f"Slack answered {method} with {type(data).__name__}, not an object"
        raise SlackError(why, retry=True, cause="bad_answer", unsure=True)
    return data


def _find(messages: Any, want: dict[str, Any]) -> str | None:
    """The ts of the message in a history page whose metadata is `want`, if any."""
    for msg in messages if isinstance(messages, list) else []:
        meta = msg.get("metadata") if isinstance(msg, dict) else None
        if not isinstance(meta, dict):
            continue
        ts = msg.get("ts")
        same = meta.get("event_type") == EVENT_TYPE and meta.get("event_payload") == want
        if same and isinstance(ts, str) and ts:
            return ts
    return None


def _ts(out: Outcome) -> str:
    if isinstance(out, Posted):
        return out.ts
    raise SlackError(str(getattr(out, "reason", out)), retry=isinstance(out, Unavailable))
