"""Is what a watch delivered the API server's present? One watch's answer, without I/O.

A decision is made on the watch's picture; a watch can be behind it without failing:

- **relisting**: after a reconnect that may have lost events (an error, a 410, a probe the
  API server did not answer, a stream gone silent), the picture is complete again only when
  the new list has been delivered to its end (`Relisted`);
- **not reached**: the API server's current resourceVersion (a quorum list of one item, the
  probe) is R, and the stream has delivered nothing at R or later (an event or a BOOKMARK)
  for longer than a BOOKMARK takes to come (the watch cache sends one about every minute,
  carrying its current resourceVersion: a stream that is flowing reaches R by then);
- **silent**: no event and no BOOKMARK for that long either;
- **unanswered**: a probe has had no answer for longer than its timeout (the API server out
  of reach: a partition cuts the stream as silently; the client's own retries take longer).

`KubeWatch` feeds it what happens (under its lock) and asks `behind(now)`; times are
monotonic seconds, passed in. A resourceVersion is compared as a number, as the watch cache
itself does (an etcd revision); one that is not a number is never taken as reaching anything.
"""

from __future__ import annotations

from dataclasses import dataclass

BOOKMARK_S = 60.0  # kube-apiserver's watch cache: a BOOKMARK about every minute
GRACE_S = 30.0  # and some slack before one is overdue (a loaded API server)


def version(rv: str | None) -> int | None:
    """A resourceVersion as a number, or None when it is not one."""
    return int(rv) if rv and rv.isdigit() else None


@dataclass
class Currency:
    bookmark_s: float = BOOKMARK_S
    grace_s: float = GRACE_S
    probe_timeout_s: float = 5.0
    relist: str | None = "not listed yet"  # why a (re)list is due; behind until it ends
    seen: int = 0  # the newest resourceVersion delivered (a list, an event, a BOOKMARK)
    heard_at: float | None = None  # when the stream last spoke (a list counts)
    target: tuple[int, float] | None = None  # (the API server's rv, when probed) not reached
    asked_at: float | None = None  # a probe in flight since

    @property
    def overdue_s(self) -> float:
        return self.bookmark_s + self.grace_s

    def lost(self, why: str) -> None:
        """Events may have been missed: behind until a new list ends (the first why stays)."""
        if self.relist is None:
            self.relist = why

    def listed(self, rv: str | None, at: float) -> None:
        """A list was delivered to its end: the picture is the API server's as of `rv`."""
        self.relist = None
        self.seen = version(rv) or 0  # a relist may start a new history (etcd restored)
        self.heard_at = at
        if self.asked_at is not None:  # it answered a list: a probe still out is timed anew
            self.asked_at = at
        self.target = None if self.target is None or self._reached(self.target[0]) else self.target

    def heard(self, rv: str | None, at: float) -> None:
        """The stream spoke: an event or a BOOKMARK at `rv`."""
        self.heard_at = at
        n = version(rv)
        if n is not None and n > self.seen:
            self.seen = n
        if self.target is not None and self._reached(self.target[0]):
            self.target = None

    def asking(self, at: float) -> None:
        """A probe is sent."""
        self.asked_at = at

    def probed(self, rv: str | None, at: float) -> None:
        """The probe's answer: the API server's current resourceVersion, read at `at` (None:
        it answered, but with no version). The oldest one not yet reached is kept: how long
        the stream has failed to reach it is what counts."""
        self.asked_at = None
        n = version(rv)
        if n is not None and self.target is None and not self._reached(n):
            self.target = (n, at)

    def _reached(self, n: int) -> bool:
        return self.seen >= n

    def behind(self, now: float) -> str | None:
        """Why the picture may lag the API server's, or None."""
        if self.relist is not None:
            return self.relist
        if self.asked_at is not None and now - self.asked_at > self.probe_timeout_s:
            return f"the API server has not answered a probe for {now - self.asked_at:.0f}s"
        if self.target is not None and now - self.target[1] > self.overdue_s:
            age = now - self.target[1]
            return (
                f"not reached resourceVersion {self.target[0]} the API server had {age:.0f}s"
                f" ago (at {self.seen}; a BOOKMARK comes every {self.bookmark_s:.0f}s)"
            )
        if self.heard_at is not None and now - self.heard_at > self.overdue_s:
            return (
                f"no event or BOOKMARK for {now - self.heard_at:.0f}s"
                f" (one comes every {self.bookmark_s:.0f}s)"
            )
        return None

    def needs_relist(self, now: float) -> str | None:
        """Behind for a reason the open stream will not mend (unanswered, not reached,
        silent): the caller cuts the stream, and the watch relists."""
        if self.relist is not None:
            return None  # already on its way
        return self.behind(now)
