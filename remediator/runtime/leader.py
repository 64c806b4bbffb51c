"""Who may act. Every replica decodes inputs and keeps its session warm; only the
leader executes the outbox. `Always` is the single-replica default
(`--no-leader-election`); `LeaseLeader` (lease.py) holds a coordination.k8s.io Lease."""

from __future__ import annotations

import asyncio
from typing import Protocol


class Leadership(Protocol):
    def is_leader(self) -> bool: ...
    async def run(self, stop: asyncio.Event) -> None: ...


class Always:
    """One replica: it always leads."""

    def is_leader(self) -> bool:
        return True

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class Never:
    """A replica that never acts (a standby, or a test that must not act)."""

    def is_leader(self) -> bool:
        return False

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()
