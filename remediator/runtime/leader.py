"""Who may act. Every replica decodes inputs, keeps its session warm and writes its own
outbox; only the leader executes rows.

- `Always`: one replica (`--no-leader-election`); it always leads.
- `Never`: a replica that never acts (tests, a forced standby).
- `LeaseLeadership`: a coordination.k8s.io/v1 Lease, client-go style. The Lease is
  pre-created (deploy/base/lease.yaml) and RBAC grants only get/update on it by name,
  so it is never created here. Writes are optimistic: `replace` carries the
  resourceVersion read, and a 409 means another replica wrote first.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from remediator.logfields import get_logger
from remediator.runtime.clock import Clock, SystemClock, wait

log = get_logger("remediator.leader")

# Told on every change: (leading now, the holder before us when we just took it over).
OnChange = Callable[[bool, str | None], None]


class Leadership(Protocol):
    identity: str

    def is_leader(self) -> bool: ...
    def subscribe(self, on_change: OnChange) -> None: ...
    async def run(self, stop: asyncio.Event) -> None: ...
    async def release(self) -> None: ...


class _Fixed:
    def __init__(self, leading: bool, identity: str | None = None) -> None:
        self.identity = identity or socket.gethostname()
        self._leading = leading

    def is_leader(self) -> bool:
        return self._leading

    def subscribe(self, on_change: OnChange) -> None:
        pass  # it never changes

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()

    async def release(self) -> None:
        pass


class Always(_Fixed):
    """One replica: it always leads."""

    def __init__(self, identity: str | None = None) -> None:
        super().__init__(True, identity)


class Never(_Fixed):
    """A replica that never acts (a standby, or a test that must not act)."""

    def __init__(self, identity: str | None = None) -> None:
        super().__init__(False, identity)


# --- the pure part: may I take it? --------------------------------------------------------
Verdict = Literal["renew", "acquire", "wait"]


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease spec fields that decide who leads."""

    holder: str | None
    duration_s: int | None
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=spec.get("holderIdentity") or None,
            duration_s=duration if isinstance(duration, int) and duration > 0 else None,
            acquire_time=parse_micro_time(spec.get("acquireTime")),
            renew_time=parse_micro_time(spec.get("renewTime")),
            transitions=transitions if isinstance(transitions, int) else 0,
        )


def may_take(record: LeaseRecord, now: datetime, me: str, fallback_duration_s: int) -> Verdict:
    """`renew` when I hold it; `acquire` when nobody does or the holder's renewTime plus
    leaseDurationSeconds has passed; otherwise `wait`. A holder without renewTime has
    never proved it is alive, so it is treated as expired. Relies on node clocks agreeing
    to well within lease duration minus renew deadline (5 s by default; NTP does)."""
    if record.holder == me:
        return "renew"
    if record.holder is None or record.renew_time is None:
        return "acquire"
    duration = record.duration_s or fallback_duration_s
    if record.renew_time + timedelta(seconds=duration) <= now:
        return "acquire"
    return "wait"


def micro_time(t: datetime) -> str:
    """MicroTime as the API server parses it: exactly six fractional digits, UTC."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def claimed(lease: dict[str, Any], me: str, now: datetime, duration_s: int) -> dict[str, Any]:
    """The Lease to write to take or keep it (its resourceVersion kept: optimistic)."""
    record = LeaseRecord.of(lease)
    spec = dict(lease.get("spec") or {})
    if record.holder != me:
        spec["acquireTime"] = micro_time(now)
        spec["leaseTransitions"] = record.transitions + 1
    spec.update(holderIdentity=me, leaseDurationSeconds=duration_s, renewTime=micro_time(now))
    return {**lease, "spec": spec}


def released(lease: dict[str, Any], now: datetime) -> dict[str, Any]:
    """As client-go releases: no holder, a 1 s duration, transitions kept."""
    spec = dict(lease.get("spec") or {})
    spec.update(
        holderIdentity="",
        leaseDurationSeconds=1,
        acquireTime=micro_time(now),
        renewTime=micro_time(now),
    )
    return {**lease, "spec": spec}


# --- the Lease ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str
    namespace: str
    identity: str
    lease_duration_s: float = 15.0  # how long a holder's claim lasts without renewal
    renew_deadline_s: float = 10.0  # a leader that has not renewed for this long stops
    retry_period_s: float = 2.0  # between attempts (acquire or renew)

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs an identity (POD_NAME or the hostname)")
        if not self.lease_duration_s > self.renew_deadline_s:
            raise ValueError("lease duration must be greater than the renew deadline")
        if not self.renew_deadline_s > 1.2 * self.retry_period_s > 0:
            raise ValueError("renew deadline must be greater than 1.2 x retry period")
        if self.lease_duration_s < 1:
            raise ValueError("lease duration must be at least 1 s")


Outcome = Literal["held", "taken", "lost"]  # held: I lead; taken: someone else does


class LeaseLeadership:
    """client-go semantics on the real `kubernetes` client (blocking calls in a thread).

    A standby reads the Lease every retry period and takes it when free or expired. The
    leader renews every retry period with the Lease it last wrote (one PUT); a 409 means
    another writer was first, so it re-reads and decides again. A leader that has not
    renewed for `renew_deadline_s` is no leader: `is_leader()` turns False at that
    instant, whatever the loop is doing, and subscribers are told."""

    def __init__(
        self, api: client.ApiClient, settings: LeaseSettings, clock: Clock | None = None
    ) -> None:
        self.identity = settings.identity
        self.settings = settings
        self._clock = clock or SystemClock()
        self._api = client.CoordinationV1Api(api)
        self._io = threading.Lock()  # one Lease call at a time (release waits for a renew)
        self._cached: dict[str, Any] | None = None  # the Lease as we last wrote it
        self._leading = False
        self._valid_until = 0.0  # monotonic: start of the last good renew + renew deadline
        self._last_other: str | None = None  # the last other holder seen
        self._subscribers: list[OnChange] = []

    def is_leader(self) -> bool:
        return self._leading and self._clock.monotonic() < self._valid_until

    def _wall(self) -> datetime:
        return datetime.fromtimestamp(self._clock.now(), UTC)

    def subscribe(self, on_change: OnChange) -> None:
        self._subscribers.append(on_change)

    @property
    def _duration(self) -> int:
        return max(1, int(round(self.settings.lease_duration_s)))

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        while not stop.is_set():
            started = self._clock.monotonic()
            budget = (self._valid_until - started) if self._leading else s.renew_deadline_s
            try:
                outcome = await asyncio.wait_for(asyncio.to_thread(self._attempt), max(budget, 0.1))
            except TimeoutError:
                outcome = "lost"
                log.warning("lease call did not answer in time", extra=self._fields())
            self._settle(outcome, started)
            pause = (
                s.retry_period_s
                if self._leading
                else s.retry_period_s * (1 + random.random() * 0.2)
            )
            if self._leading:  # wake in time to step down at the deadline
                pause = min(pause, max(self._valid_until - self._clock.monotonic(), 0.0))
            await wait(stop, pause, self._clock)

    def _settle(self, outcome: Outcome, started: float) -> None:
        if outcome == "held":
            self._valid_until = started + self.settings.renew_deadline_s
            self._change(True)
        elif outcome == "taken" or self._clock.monotonic() >= self._valid_until:
            self._change(False)

    def _change(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        previous = self._last_other if leading else None
        if leading:
            log.warning("leadership acquired", extra={**self._fields(), "previous": previous})
        else:
            self._valid_until = 0.0
            self._cached = None
            log.warning("leadership lost: stop acting", extra=self._fields())
        for tell in self._subscribers:
            tell(leading, previous)

    def _fields(self) -> dict[str, str]:
        s = self.settings
        return {"lease": f"{s.namespace}/{s.name}", "identity": self.identity}

    # --- blocking (a worker thread) --------------------------------------------------------
    def _attempt(self) -> Outcome:
        with self._io:
            try:
                return self._try()
            except ApiException as err:
                self._complain(err)
            except (HTTPError, OSError, ValueError) as err:
                log.warning("lease call failed", extra={**self._fields(), "error": repr(err)})
            return "lost"  # no verdict: a leader keeps leading until its deadline

    def _complain(self, err: ApiException) -> None:
        s = self.settings
        if err.status == 404:
            why = "not found: it is pre-created (deploy/base/lease.yaml); never created here"
        elif err.status == 403:
            why = "forbidden: RBAC must allow get and update on it by name"
        else:
            why = f"{err.status} {err.reason}"
        log.error(f"lease {s.namespace}/{s.name} {why}", extra=self._fields())

    def _try(self) -> Outcome:
        if self._cached is not None and self._leading:  # fast path: renew what we wrote
            outcome = self._write(self._cached, "renew")
            if outcome is not None:
                return outcome
        for _ in range(2):  # a 409 means someone wrote first: read again and decide again
            lease = self._read()
            record = LeaseRecord.of(lease)
            now = self._wall()
            verdict = may_take(record, now, self.identity, self._duration)
            if verdict == "wait":
                self._cached = None
                self._last_other = record.holder
                return "taken"
            if record.holder and record.holder != self.identity:
                self._last_other = record.holder
                log.warning(
                    "lease expired: taking it over", extra={**self._fields(), "from": record.holder}
                )
            outcome = self._write(lease, verdict)
            if outcome is not None:
                return outcome
        return "lost"

    def _write(self, lease: dict[str, Any], verdict: Verdict) -> Outcome | None:
        """Replace with the Lease's resourceVersion; None on 409 (read again)."""
        body = claimed(lease, self.identity, self._wall(), self._duration)
        try:
            self._cached = self._replace(body)
        except ApiException as err:
            if err.status != 409:
                raise
            self._cached = None
            log.info("lease conflict: re-reading", extra={**self._fields(), "on": verdict})
            return None
        return "held"

    def _read(self) -> dict[str, Any]:
        s = self.settings
        # _preload_content=False: the raw response (no model), as the watches read.
        response: Any = self._api.read_namespaced_lease(
            s.name, s.namespace, _preload_content=False, _request_timeout=s.renew_deadline_s
        )
        return _json(response.data)

    def _replace(self, body: dict[str, Any]) -> dict[str, Any]:
        """PUT the Lease as read, through the client's transport and auth. Not through
        `replace_namespaced_lease`: it validates the body into a V1Lease model, which
        refuses fields the model does not know (a newer server's, a stand-in's) and writes
        MicroTime back with `isoformat()` (no fraction on a whole second: a 400)."""
        s = self.settings
        api = self._api.api_client
        request = api.param_serialize(
            method="PUT",
            resource_path="/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            path_params={"namespace": s.namespace, "name": s.name},
            header_params={"Accept": "application/json", "Content-Type": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        response = api.call_api(*request, _request_timeout=s.renew_deadline_s)
        response.read()
        if not 200 <= response.status <= 299:
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return _json(response.data)

    # --- graceful shutdown -------------------------------------------------------------------
    async def release(self) -> None:
        """Give the Lease up so a standby takes over at once (not after it expires)."""
        if not self._leading:
            return
        self._change(False)
        try:
            await asyncio.wait_for(asyncio.to_thread(self._release), self.settings.renew_deadline_s)
        except TimeoutError:
            log.warning("lease release did not answer in time", extra=self._fields())

    def _release(self) -> None:
        with self._io:
            for _ in range(2):
                try:
                    lease = self._read()
                    if LeaseRecord.of(lease).holder != self.identity:
                        return  # not ours any more: nothing to give up
                    self._replace(released(lease, self._wall()))
                    log.info("lease released", extra=self._fields())
                    return
                except ApiException as err:
                    if err.status != 409:
                        self._complain(err)
                        return
                except (HTTPError, OSError, ValueError) as err:
                    log.warning(
                        "lease release failed", extra={**self._fields(), "error": repr(err)}
                    )
                    return


def _json(data: bytes) -> dict[str, Any]:
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("kind") != "Lease":
        raise ValueError(f"expected a Lease, got {str(doc)[:200]}")
    return doc
