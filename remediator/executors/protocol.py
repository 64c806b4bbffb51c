"""The one seam between a runtime and the outside world: `carry(command) -> outcome`.

Like httpx's `BaseTransport.handle_request`, each executor is one async method with its
real client inside: Argo (`argo.py`: Submit, Poll), Slack (`slack.py`: Tell) and the
dry-run `Recorder` (`recorder.py`: any command, answered without I/O). A runtime (the
embedded outbox worker, a Faust agent) drives commands and stores outcomes; it never
catches a client's exceptions: every failure comes back as `Unavailable` (try again
later) or `Refused` (trying again cannot help).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from remediator.contract.decision import Decision

# --- commands --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submit:
    """Start carrying out a decision (Argo: submit its WorkflowTemplate)."""

    decision: Decision


@dataclass(frozen=True, slots=True)
class Poll:
    """Look once at how a submitted decision is doing."""

    decision: Decision
    workflow: str


@dataclass(frozen=True, slots=True)
class Acted:
    """On-call hears what was done (or, with no workflow, what needs attention)."""

    decision: Decision
    submitted: Submitted | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    decision: Decision
    ended: Ended


@dataclass(frozen=True, slots=True)
class WouldHave:
    """A dry run held the decision; on-call hears what a live run would have done."""

    decision: Decision
    reason: str


@dataclass(frozen=True, slots=True)
class CouldNot:
    decision: Decision
    error: str


@dataclass(frozen=True, slots=True)
class NotStarted:
    """Argo took the workflow, and it has not started in `waited_s` (still Pending: no
    controller, a quota, a missing service account): someone has to look. It is still
    followed to its end."""

    decision: Decision
    workflow: str
    phase: str
    waited_s: float
    url: str = ""


@dataclass(frozen=True, slots=True)
class Spared:
    """A delete not made: looked at again just before it, the pod was no longer stuck
    (Ready, moved on a phase, another instance, gone)."""

    decision: Decision
    reason: str


Note = Acted | Finished | WouldHave | CouldNot | NotStarted | Spared


@dataclass(frozen=True, slots=True)
class Tell:
    """Tell people. `thread` is the message to reply under (the act message), if any.
    `unsure_since`: a post of this note was begun then (wall time) and its answer never
    stored (a crash, a lost answer): look for it before posting it again."""

    note: Note
    thread: str | None = None
    unsure_since: float | None = None


Command = Submit | Poll | Tell

# --- outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submitted:
    name: str
    namespace: str
    template: str
    incident: str
    created: bool  # False: it already existed (409), which counts as done
    url: str


@dataclass(frozen=True, slots=True)
class Running:
    workflow: str
    phase: str
    url: str = ""  # where people can look at it


@dataclass(frozen=True, slots=True)
class Ended:
    name: str
    phase: str  # Succeeded | Failed | Error
    message: str
    started_at: str | None
    finished_at: str | None
    url: str = ""

    def duration_s(self) -> float | None:
        """Seconds from start to finish, when Argo reported both."""
        if not (self.started_at and self.finished_at):
            return None
        try:
            start = datetime.fromisoformat(self.started_at)
            end = datetime.fromisoformat(self.finished_at)
        except ValueError:
            return None
        return (end - start).total_seconds()


@dataclass(frozen=True, slots=True)
class Posted:
    ts: str  # the message's id; replies go under it


@dataclass(frozen=True, slots=True)
class Unavailable:
    """Could not be reached or answered 5xx (after its own bounded retries): try later.
    `unauthorized`: it refused our credentials (a token being rotated), also worth a retry."""

    reason: str
    unauthorized: bool = False
    cause: str = ""  # a short fixed word naming the failure class (a metric's label), if known


@dataclass(frozen=True, slots=True)
class Refused:
    """Said no (bad request, bad parameter, unknown channel): trying again cannot help."""

    reason: str
    cause: str = ""  # a short fixed word naming the failure class (a metric's label), if known


Outcome = Submitted | Running | Ended | Posted | Unavailable | Refused


class Executor(Protocol):
    async def carry(self, command: Command) -> Outcome: ...
