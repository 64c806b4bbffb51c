"""The one seam between a runtime and the outside world: `carry(command) -> outcome`.

Like httpx's `BaseTransport.handle_request`, each executor is one async method with its
real client inside: Argo (`argo.py`: Submit, Poll), Slack (`slack.py`: Tell) and the
dry-run `Recorder` (`recorder.py`: any command, answered without I/O). A runtime (the
embedded outbox worker, a Faust agent) drives commands and stores outcomes; it never
catches a client's exceptions: every failure comes back as `Unavailable` (try again
later) or `Refused` (trying again cannot help).

Commands and notes are tagged msgspec structs, so a `Command` (a `Tell` with any of its
notes) crosses a process through `contract.codec` like every other record:
`decode(encode(command), Command)` gives it back; outcomes are plain dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import msgspec

from remediator.contract.decision import Decision

# --- commands --------------------------------------------------------------------------


class Submit(msgspec.Struct, frozen=True, tag=True):
    """Start carrying out a decision (Argo: submit its WorkflowTemplate)."""

    decision: Decision


class Poll(msgspec.Struct, frozen=True, tag=True):
    """Look once at how a submitted decision is doing."""

    decision: Decision
    workflow: str


class Acted(msgspec.Struct, frozen=True, tag=True):
    """On-call hears what was done (or, with no workflow, what needs attention)."""

    decision: Decision
    submitted: Submitted | None = None


class Finished(msgspec.Struct, frozen=True, tag=True):
    decision: Decision
    ended: Ended


class WouldHave(msgspec.Struct, frozen=True, tag=True):
    """A dry run held the decision; on-call hears what a live run would have done."""

    decision: Decision
    reason: str


class CouldNot(msgspec.Struct, frozen=True, tag=True):
    decision: Decision
    error: str


class NotStarted(msgspec.Struct, frozen=True, tag=True):
    """Argo took the workflow, and it has not started in `waited_s` (still Pending: no
    controller, a quota, a missing service account): someone has to look. It is still
    followed to its end."""

    decision: Decision
    workflow: str
    phase: str
    waited_s: float
    url: str = ""


class Spared(msgspec.Struct, frozen=True, tag=True):
    """A delete not made: looked at again just before it, the pod was no longer stuck
    (Ready, moved on a phase, another instance, gone)."""

    decision: Decision
    reason: str


Note = Acted | Finished | WouldHave | CouldNot | NotStarted | Spared


class Tell(msgspec.Struct, frozen=True, tag=True):
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
