"""Which stream partitions have records that never reached their agent: Faust drops a
fetched record in a few places around a rebalance, and only a seek back to the committed
offset brings it again, which Faust does for partitions with an offset committed only.

Seen here (docs/kafka.md): a worker whose group was rebalancing as the first records
came took them from the consumer and never gave them to its agents; the partitions had
no committed offset yet, so Faust's seek after the rebalance left them where they were,
one record short for good (the lag stayed 1, the worker idle). Faust's own paths that
drop: a stream skips an event fetched in an earlier generation or while flow control is
suspended; the fetcher abandons a record whose delivery a rebalance interrupts.

Pure: fed the last offset each partition delivered, on an injected clock. A partition
that delivered nothing for `quiet_s` while it has records past what it delivered, found
so at two looks in a row, is stuck, not slow: the worker seeks it back (`streams.app`).
Of a partition that delivered nothing here yet (taken over, or new), what was delivered
is what the group committed: the worker looks it up once (`unknown`, `learn`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["QUIET_S", "Progress"]

# A partition that delivered nothing this long while records wait is stuck, not slow:
# an agent takes what is waiting at once, and a worker's own ticks reach every input
# partition it holds every --tick (1 s by default).
QUIET_S = 5.0

P = TypeVar("P", bound=Hashable)


@dataclass
class Progress(Generic[P]):
    """The last offset each partition delivered to an agent, and when."""

    clock: Callable[[], float]
    quiet_s: float = QUIET_S
    last: dict[P, int] = field(default_factory=dict)
    # Of a partition that delivered nothing here: the group's committed offset (0: none)
    committed: dict[P, int] = field(default_factory=dict)
    _at: dict[P, float] = field(default_factory=dict)  # when each delivered last
    _since: float | None = None  # the first look, the last seek back or rebalance
    _suspect: dict[P, int] = field(default_factory=dict)  # stuck at the last look

    def saw(self, tp: P, offset: int) -> None:
        self.last[tp] = max(offset, self.last.get(tp, -1))
        self._at[tp] = self.clock()

    def forget(self, tps: Iterable[P]) -> None:
        """Partitions revoked: another worker delivers them now."""
        for tp in tps:
            self.last.pop(tp, None)
            self.committed.pop(tp, None)
            self._at.pop(tp, None)

    def unknown(self, ends: Mapping[P, int | None]) -> list[P]:
        """Partitions with records that delivered nothing here, whose committed offset is
        not known yet: what was delivered before this worker held them."""
        return [tp for tp, end in ends.items()
                if end and tp not in self.last and tp not in self.committed]  # fmt: skip

    def learn(self, committed: Mapping[P, int]) -> None:
        """The group's committed offsets (0: none) of partitions that delivered nothing here."""
        self.committed.update(committed)

    def _following(self, tp: P) -> int | None:
        if tp in self.last:
            return self.last[tp] + 1
        return self.committed.get(tp)

    def stuck(self, ends: Mapping[P, int | None]) -> dict[P, int]:
        """`ends`: each partition held, and the offset its next record will take (None:
        not known). The partitions with records past the last delivered (of one that
        delivered nothing here: past its committed offset; not known: not judged) and
        nothing delivered for `quiet_s`, found so at this look and the one before with
        nothing delivered in between, and the offset delivery should go on from. (Two
        looks: a record delivered while a look awaited the ends is not taken for lost.)"""
        now = self.clock()
        if self._since is None:
            self._since = now  # quiet is counted from the first look
        found: dict[P, int] = {}
        for tp, end in ends.items():
            following = self._following(tp)
            quiet = now - max(self._at.get(tp, -math.inf), self._since) >= self.quiet_s
            if quiet and end is not None and following is not None and end > following:
                found[tp] = following
        confirmed = {tp: at for tp, at in found.items() if self._suspect.get(tp) == at}
        self._suspect = found
        return confirmed

    def rewound(self) -> None:
        """A seek back was made (or a rebalance did one): give it `quiet_s` to deliver
        before looking again."""
        self._since = self.clock()
        self._suspect = {}
