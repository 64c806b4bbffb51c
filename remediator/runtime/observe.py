"""Edges that act on what the tracker knows, looked at once a second from the loop: the
engine-log follower (pods in engine init) and the first-token probe (pods Ready without a
first token). Both only read the session; what they learn comes back as inputs."""

from __future__ import annotations

import asyncio
import contextlib

from remediator.logfields import get_logger
from remediator.session import Session
from remediator.sources.engine_logs import EngineLogFollower, in_engine_init
from remediator.sources.first_token import FirstTokenProber, ready_without_first_token

log = get_logger(__name__)


class Observers:
    def __init__(
        self,
        session: Session,
        follower: EngineLogFollower | None = None,
        prober: FirstTokenProber | None = None,
        every_s: float = 1.0,
    ) -> None:
        self.session = session
        self.follower = follower
        self.prober = prober
        self.every_s = every_s

    @property
    def active(self) -> bool:
        return self.follower is not None or self.prober is not None

    def tick(self) -> None:
        pods = self.session.tracker
        selected = self.session.engine.selected
        if self.follower is not None:
            self.follower.sync(in_engine_init(pods, selected), self.session.engine.logs_wanted())
        if self.prober is not None:
            self.prober.sync(ready_without_first_token(pods, selected))

    async def run(self) -> None:
        while True:
            try:
                self.tick()
            except Exception:  # a bug here must not stop the service's other work
                log.exception("observer tick failed")
            await asyncio.sleep(self.every_s)

    async def close(self) -> None:
        if self.follower is not None:
            await asyncio.to_thread(self.follower.stop)
        if self.prober is not None:
            with contextlib.suppress(Exception):
                await self.prober.close()
