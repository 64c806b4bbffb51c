"""What the executor agent hands a command to: one method, `carry(decision) -> Outcome`.

Idempotent by construction: the workflow name is derived from the incident and the
action (`argo_params.workflow_name`), so a command carried twice (redelivered after
a crash) submits nothing new: Argo answers 409 AlreadyExists, counted as done.
`TellingCarrier` tells on-call in Slack (the notifier behind `executors.protocol`) what
the carrier did, once: a redelivered command, which creates nothing, tells nothing.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from remediator.contract.decision import Decision
from remediator.executors import argo_params
from remediator.executors.argo import ArgoError, ArgoExecutor, SubmitRejected
from remediator.executors.protocol import (
    Acted,
    Ended,
    Executor,
    Finished,
    Poll,
    Posted,
    Refused,
    Submitted,
    Tell,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # created | exists | recorded | skipped | rejected | unavailable
    name: str | None = None  # the workflow's name, where one is run
    detail: str = ""
    submitted: Submitted | None = None  # what Argo answered to a submit that created one


class Carrier(Protocol):
    async def carry(self, decision: Decision) -> Outcome: ...


class ArgoCarrier:
    """Acting decisions become Workflows; `notify` runs none (Slack is the notifier's)."""

    def __init__(self, argo: ArgoExecutor) -> None:
        self._argo = argo

    async def carry(self, decision: Decision) -> Outcome:
        if decision.action not in argo_params.WORKFLOWS:
            return Outcome("skipped", None, f"{decision.action} runs no workflow")
        try:
            submitted = await self._argo.submit(decision)
        except SubmitRejected as exc:
            return Outcome("rejected", argo_params.workflow_name(decision), str(exc))
        except ArgoError as exc:
            # Unavailable after the bounded retries: raise, so the record is not
            # committed and is carried again (by this worker or the next).
            log.error("argo unavailable", extra={"incident": decision.incident, "error": str(exc)})
            raise
        if not submitted.created:
            return Outcome("exists", submitted.name)
        return Outcome("created", submitted.name, submitted=submitted)


class DryRunRecorder:
    """Writes what would run, one JSON line per workflow name, each name once, as Argo
    would refuse a second submit under one name: workers sharing the file (on one host)
    check it under a lock, so a command redelivered to another worker records nothing."""

    def __init__(self, path: str | None) -> None:
        self._path = Path(path) if path else None
        self._seen: set[str] = set()

    async def carry(self, decision: Decision) -> Outcome:
        name = (
            argo_params.workflow_name(decision)
            if decision.action in argo_params.WORKFLOWS
            else f"notify-{decision.incident}"
        )
        if name in self._seen:
            return Outcome("exists", name)
        self._seen.add(name)
        if self._path is None:
            return Outcome("recorded", name)
        line = {"workflow": name, "incident": decision.incident, "action": decision.action}
        with self._path.open("a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            if any(json.loads(seen)["workflow"] == name for seen in f.read().splitlines()):
                return Outcome("exists", name)
            f.write(json.dumps(line) + "\n")
        return Outcome("recorded", name)


class TellingCarrier:
    """Carries with `inner`, then tells on-call what was done: the act message of a workflow
    created (or recorded, in a dry run), the notice of a `notify`. Nothing is told for a
    command that created nothing (redelivered: it was told the first time). With `follow`
    (the Argo executor), a workflow it created is polled to its end in the background and the
    end is replied in the act message's thread, as serve does; that follow lives in this
    process only (a worker that dies mid-follow leaves the end untold: logged, not retried).
    Slack down: a few tries, then a logged error; the command itself is done and stays done."""

    def __init__(
        self,
        inner: Carrier,
        notifier: Executor,
        follow: Executor | None = None,
        *,
        tries: int = 3,
        poll_s: float = 5.0,
        give_up_s: float = 3600.0,
    ) -> None:
        self.inner = inner
        self.notifier = notifier
        self.follow = follow
        self.tries, self.poll_s, self.give_up_s = tries, poll_s, give_up_s
        self._following: set[asyncio.Task[None]] = set()

    async def carry(self, decision: Decision) -> Outcome:
        outcome = await self.inner.carry(decision)
        if outcome.status in ("created", "recorded") or (
            outcome.status == "skipped" and decision.action == "notify"
        ):
            ts = await self._tell(Tell(Acted(decision, outcome.submitted)), decision)
            if ts is not None and outcome.submitted is not None and self.follow is not None:
                task = asyncio.create_task(self._to_the_end(decision, outcome.submitted, ts))
                self._following.add(task)
                task.add_done_callback(self._following.discard)
        return outcome

    async def _to_the_end(self, decision: Decision, submitted: Submitted, ts: str) -> None:
        assert self.follow is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.give_up_s
        while loop.time() < deadline:
            seen = await self.follow.carry(Poll(decision, submitted.name))
            if isinstance(seen, Ended):
                await self._tell(Tell(Finished(decision, seen), thread=ts), decision)
                return
            if isinstance(seen, Refused):
                break
            await asyncio.sleep(self.poll_s)
        where = {"incident": decision.incident, "workflow": submitted.name}
        log.error("workflow not followed to its end", extra=where)

    async def _tell(self, tell: Tell, decision: Decision) -> str | None:
        """The message's ts once posted, else None (after `tries`, logged)."""
        told: object = None
        for attempt in range(self.tries):
            told = await self.notifier.carry(tell)
            if isinstance(told, Posted):
                return told.ts
            if attempt + 1 < self.tries:
                await asyncio.sleep(2.0**attempt)
        log.error(
            "slack not told",
            extra={"incident": decision.incident, "action": decision.action, "outcome": str(told)},
        )
        return None
