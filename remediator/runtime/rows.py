"""The acting component's rows, and the small store it keeps them in.

One row per decision let through, (incident, action) unique, moved on by the acting
component (`runtime/worker.py`, the same in `serve` and on Kafka):

    pending ──Submit──▶ submitted ──Poll…──▶ ended      (a workflow followed to its end)
       │                    │
       ├──Refused───────────┴──────────────▶ failed     (told, then closed)
       ├──looked at again, no longer stuck─▶ ended (spared)
       ├──a note only, told────────────────▶ ended (notified)
       └──too old when this owner took it──▶ expired    (never executed late)

Each row tells people at most three times, each message an intent column (`*_at`, written
before the post) and a ts column (after it): the act message (`act_at`, `slack_ts`), a "not
started" reply (`stuck_at`, `stuck_ts`) and the end message (`end_at`, `end_ts`).

`RowStore` is all the acting component asks of where rows live. Two stores keep it:
`runtime.outbox.OutboxRows` (SQLite, `serve`: the driver writes the rows with the guard
state in one transaction) and `streams.rows.TableRows` (a Faust table with its changelog
topic, `remediator worker`: the commands agent writes the rows). A write is durable when
the call returns: a process killed after it finds it again on restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from remediator.contract.decision import Decision

State = Literal["pending", "submitted", "ended", "failed", "expired", "dry"]
# A pending row's phase once its submit has been tried: the workflow may exist.
SUBMITTING = "submitting"
STATES: tuple[State, ...] = ("pending", "submitted", "ended", "failed", "expired", "dry")
OPEN: tuple[State, ...] = ("pending", "submitted")

# What `mark` may set besides the state.
FIELDS = frozenset(
    {
        "workflow",
        "phase",
        "error",
        "attempts",
        "act_at",
        "slack_ts",
        "end_at",
        "end_ts",
        "submitted_at",
        "stuck_at",
        "stuck_ts",
    }
)


@dataclass(frozen=True, slots=True)
class Row:
    id: int  # the store's handle for the row (SQLite's rowid; a table's, per process)
    decision: Decision
    state: State
    workflow: str | None
    phase: str | None
    error: str | None
    slack_ts: str | None  # the act message, once posted
    attempts: int
    created_at: float  # wall time the decision was written
    act_at: float | None = None  # when posting the act message was begun
    end_at: float | None = None  # when posting the end message was begun
    end_ts: str | None = None  # the end message, once posted
    submitted_at: float | None = None  # wall time Argo took the workflow
    stuck_at: float | None = None  # when posting the "not started" message was begun
    stuck_ts: str | None = None  # the "not started" message, once posted

    @property
    def incident(self) -> str:
        return self.decision.incident

    @property
    def open(self) -> bool:
        """To execute, to follow, or (failed) still to tell."""
        told = self.state == "failed" and self.end_at is not None and self.end_ts is None
        return self.state in OPEN or told


def unknown_fields(fields: Mapping[str, object]) -> None:
    unknown = set(fields) - FIELDS
    if unknown:
        raise ValueError(f"unknown row fields {sorted(unknown)}")


class RowStore(Protocol):
    """Where the acting component keeps its rows. Every call is durable when it returns."""

    async def open_rows(self) -> list[Row]:
        """Open rows (`Row.open`) this process owns, oldest first."""
        ...

    async def mark(self, row: Row, state: State | None, **fields: str | float | None) -> None:
        """Move a row on: `state` (None: unchanged) and `fields` among `FIELDS`."""
        ...

    async def expire(self, written_before: float, why: str) -> list[Row]:
        """Pending rows written before then become `expired` (with `why` as error)."""
        ...

    async def prune(self, closed_before: float) -> int:
        """Delete closed rows last moved before then; how many went."""
        ...

    async def act_message(self, incident: str) -> str | None:
        """The act message (its ts) of a row of `incident` this store holds, if one was
        posted: the thread a decision `told_under` it is told in."""
        ...
