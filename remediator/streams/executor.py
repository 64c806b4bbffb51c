"""What the executor agent hands a command to: one method, `carry(decision) -> Outcome`.

Idempotent by construction: the workflow name is derived from the incident and the
action (`argo_params.workflow_name`), so a command carried twice (redelivered after
a crash) submits nothing new: Argo answers 409 AlreadyExists, counted as done.
"""

from __future__ import annotations

import fcntl
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from remediator.contract.decision import Decision
from remediator.executors import argo_params
from remediator.executors.argo import ArgoError, ArgoExecutor, SubmitRejected

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # created | exists | recorded | skipped | rejected | unavailable
    name: str | None = None  # the workflow's name, where one is run
    detail: str = ""


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
        return Outcome("created" if submitted.created else "exists", submitted.name)


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
