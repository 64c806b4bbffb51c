"""The dry-run executor: carries nothing, records every command, answers at once.

What `httpx.MockTransport` is to httpx: the runtime cannot tell it from a real
executor. `serve --dry-run` without an Argo server uses it (a command that reaches it
is refused, so nothing is ever pretended done); tests give it a handler to script
answers, with no sockets and no clock."""

from __future__ import annotations

from collections.abc import Callable

from remediator.executors.protocol import Command, Outcome, Refused


def refuse(command: Command) -> Outcome:
    return Refused("no executor configured (dry run): nothing was carried out")


class Recorder:
    def __init__(self, handler: Callable[[Command], Outcome] = refuse) -> None:
        self.handler = handler
        self.carried: list[Command] = []

    async def carry(self, command: Command) -> Outcome:
        self.carried.append(command)
        return self.handler(command)
