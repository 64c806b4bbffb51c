"""Whether a worker's table recovery still moves: a takeover's restore that reads nothing
for long is stalled, and the worker says so on /healthz (a liveness probe restarts it).

Faust's recovery can wait for good for changelog records that never come (faust-streaming
issues #21, #74, #155, #176; seen here after a peer's SIGKILL: "No event received for
active tp" on every changelog partition, the fetcher idle). A worker in that state holds
its partitions and does nothing with them; its lag only grows, and Faust only logs a
warning every few seconds. Restarting it hands its partitions to a fresh consumer, which
restores them from the changelogs: nothing is lost, since every table is in Kafka.

Pure: fed how many changelog records the recovery has left, on an injected clock.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RecoveryWatch", "Stalled"]


@dataclass(frozen=True, slots=True)
class Stalled:
    remaining: int  # changelog records the recovery still has to read
    for_s: float  # seconds without one of them read


@dataclass
class RecoveryWatch:
    """`stall_s`: seconds a recovery may go without reading one of its remaining records
    before it is stalled (0: never). A slow restore that reads on is never stalled."""

    stall_s: float
    _remaining: int = 0
    _since: float | None = None  # when `_remaining` was last seen to change
    _sought: bool = False  # the changelogs were sought again in this wait

    def sample(self, remaining: int, now: float) -> None:
        """`remaining`: records left to restore now (0: not recovering, or done)."""
        if remaining <= 0:
            self._remaining, self._since, self._sought = 0, None, False
        elif remaining != self._remaining or self._since is None:
            self._remaining, self._since, self._sought = remaining, now, False

    def seek_again(self, now: float, after_s: float) -> bool:
        """True once per wait, `after_s` into it: time to seek the changelogs again (what
        was fetched and dropped is fetched again) before giving up on the worker."""
        if self._since is None or self._sought or now - self._since < after_s:
            return False
        self._sought = True
        return True

    def stalled(self, now: float) -> Stalled | None:
        if self.stall_s <= 0 or self._since is None:
            return None
        waited = now - self._since
        return Stalled(self._remaining, waited) if waited >= self.stall_s else None
