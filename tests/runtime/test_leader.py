"""The Lease, decided and written: the pure "may I take it?" table, the MicroTime
format, the settings' rules, and LeaseLeadership against the stand-in API server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from remediator.runtime.leader import (
    LeaseLeadership,
    LeaseRecord,
    LeaseSettings,
    may_take,
    micro_time,
    parse_micro_time,
)
from remediator.sources.kube_client import api_client
from tests.runtime.conftest import LEASE, LEASE_NS, lease_settings, lease_spec, wait_until
from tests.standins.kube_api import KubeApiServer, lease

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def record(
    holder: str | None, renewed_ago_s: float | None, duration_s: int | None = 15
) -> LeaseRecord:
    renew = None if renewed_ago_s is None else NOW - timedelta(seconds=renewed_ago_s)
    return LeaseRecord(holder, duration_s, renew, renew, 3)


@pytest.mark.parametrize(
    ("rec", "verdict"),
    [
        (record(None, None), "acquire"),  # shipped empty (deploy/base/lease.yaml)
        (record(None, 1), "acquire"),  # released on shutdown
        (record("me", 1), "renew"),
        (record("me", 600), "renew"),  # mine, even after a long pause: renew, no transition
        (record("other", 1), "wait"),
        (record("other", 14.9), "wait"),
        (record("other", 15), "acquire"),  # renewTime + duration reached
        (record("other", 60), "acquire"),
        (record("other", 20, duration_s=30), "wait"),  # the holder's own duration counts
        (record("other", 20, duration_s=None), "acquire"),  # none written: ours (15)
        (record("other", None), "acquire"),  # a holder that never renewed
        (record("other", -5), "wait"),  # a holder clock ahead of ours: still live
    ],
)
def test_may_i_take_it(rec: LeaseRecord, verdict: str) -> None:
    assert may_take(rec, NOW, "me", fallback_duration_s=15) == verdict


def test_lease_record_reads_the_spec_and_tolerates_garbage() -> None:
    rec = LeaseRecord.of(
        lease(
            LEASE_NS,
            LEASE,
            holderIdentity="pod-a",
            renewTime="2025-03-01T12:00:00.000000Z",
            leaseTransitions=4,
        )
    )
    assert rec == LeaseRecord("pod-a", 15, None, NOW, 4)
    junk = LeaseRecord.of(
        {"spec": {"holderIdentity": "", "renewTime": "soon", "leaseDurationSeconds": "15"}}
    )
    assert junk == LeaseRecord(None, None, None, None, 0)


def test_micro_time_has_six_digits_even_on_a_whole_second() -> None:
    assert micro_time(NOW) == "2025-03-01T12:00:00.000000Z"
    later = NOW + timedelta(microseconds=120)
    assert micro_time(later) == "2025-03-01T12:00:00.000120Z"
    assert parse_micro_time(micro_time(later)) == later


@pytest.mark.parametrize(
    ("duration", "deadline", "retry", "error"),
    [
        (10, 10, 2, "greater than the renew deadline"),
        (15, 2, 2, "1.2 x retry period"),
        (15, 10, 0, "1.2 x retry period"),
    ],
)
def test_settings_refuse_timings_that_cannot_work(
    duration: float, deadline: float, retry: float, error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        LeaseSettings(LEASE, LEASE_NS, "me", duration, deadline, retry)


def test_settings_need_an_identity() -> None:
    with pytest.raises(ValueError, match="identity"):
        LeaseSettings(LEASE, LEASE_NS, "")


@asynccontextmanager
async def electing(
    kube: KubeApiServer, tmp_path: Path, identity: str
) -> AsyncIterator[LeaseLeadership]:
    api = api_client(str(kube.write_kubeconfig(tmp_path / f"kubeconfig-{identity}")))
    leader = LeaseLeadership(api, lease_settings(identity))
    stop = asyncio.Event()
    task = asyncio.create_task(leader.run(stop))
    try:
        yield leader
    finally:
        stop.set()
        await task
        await leader.release()


@pytest.fixture
def kube() -> KubeApiServer:
    with KubeApiServer() as api:
        yield api  # type: ignore[misc]


async def test_acquires_renews_and_releases_the_precreated_lease(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    kube.store.create(lease(LEASE_NS, LEASE))
    changes: list[tuple[bool, str | None]] = []
    async with electing(kube, tmp_path, "pod-a") as a:
        a.subscribe(lambda leading, prev: changes.append((leading, prev)))
        await wait_until(a.is_leader, what="pod-a leads")
        first = lease_spec(kube)
        await wait_until(lambda: lease_spec(kube)["renewTime"] != first["renewTime"], what="renew")
        spec = lease_spec(kube)
    assert first["holderIdentity"] == "pod-a" and first["leaseTransitions"] == 1
    assert spec["acquireTime"] == first["acquireTime"], "a renew keeps acquireTime"
    assert spec["leaseTransitions"] == 1, "a renew is no transition"
    assert spec["leaseDurationSeconds"] == 2
    released = lease_spec(kube)
    assert released["holderIdentity"] == "" and released["leaseTransitions"] == 1
    assert changes == [(True, None), (False, None)]
    assert not kube.sent("POST"), "the Lease is never created"


async def test_a_live_holder_is_waited_for_and_an_expired_one_taken_over(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    kube.store.create(
        lease(
            LEASE_NS,
            LEASE,
            holderIdentity="pod-old",
            renewTime=micro_time(datetime.now(UTC)),
            leaseDurationSeconds=2,
            leaseTransitions=7,
        )
    )
    changes: list[tuple[bool, str | None]] = []
    async with electing(kube, tmp_path, "pod-b") as b:
        b.subscribe(lambda leading, prev: changes.append((leading, prev)))
        await wait_until(lambda: len(kube.sent("GET", f"/leases/{LEASE}")) >= 2, what="reads")
        assert not b.is_leader() and lease_spec(kube)["holderIdentity"] == "pod-old"
        await wait_until(b.is_leader, what="takeover after expiry")
        spec = lease_spec(kube)
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 8
    assert changes[0] == (True, "pod-old")


async def test_a_409_on_renew_from_another_holder_makes_the_loser_stop(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    kube.store.create(lease(LEASE_NS, LEASE))
    res = kube.resource("coordination.k8s.io/v1", "leases")
    async with electing(kube, tmp_path, "pod-a") as a:
        await wait_until(a.is_leader, what="pod-a leads")
        # Another replica writes the Lease between two renews (no resourceVersion: it wins).
        current = kube.store.get(res, LEASE_NS, LEASE)
        intruder = {**current, "metadata": {"name": LEASE, "namespace": LEASE_NS}}
        intruder["spec"] = {
            **current["spec"],
            "holderIdentity": "pod-z",
            "renewTime": micro_time(datetime.now(UTC)),
            "leaseDurationSeconds": 60,
        }
        puts_before = len(kube.sent("PUT"))
        kube.store.update(res, LEASE_NS, LEASE, intruder, dry=False)
        await wait_until(lambda: not a.is_leader(), what="pod-a steps down")
        await wait_until(lambda: len(kube.sent("GET", f"/leases/{LEASE}")) >= 3, what="re-reads")
    assert lease_spec(kube)["holderIdentity"] == "pod-z", "the loser must not overwrite"
    assert len(kube.sent("PUT")) - puts_before == 1, "one renew (409), then only reads"


async def test_a_missing_lease_is_never_created_and_nobody_leads(
    kube: KubeApiServer, tmp_path: Path
) -> None:
    async with electing(kube, tmp_path, "pod-a") as a:
        await wait_until(lambda: len(kube.sent("GET", f"/leases/{LEASE}")) >= 3, what="reads")
        assert not a.is_leader()
    assert not kube.sent("POST") and not kube.sent("PUT")
