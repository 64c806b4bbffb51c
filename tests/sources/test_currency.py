"""Is a watch's picture the API server's present? (sources/currency.py; the I/O is
KubeWatch's, tested in tests/sources/test_kube_watch.py and tests/live.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remediator.sources.currency import Currency, version

OVERDUE = 75.0  # `listed()`: a BOOKMARK every 60 s, and 15 s of grace


def listed(at: float = 0.0, rv: str = "100") -> Currency:
    c = Currency(60.0, 15.0)
    c.listed(rv, at)
    return c


def test_behind_until_the_first_list_has_been_delivered() -> None:
    c = Currency()
    assert c.behind(0.0) == "not listed yet"
    c.listed("100", 1.0)
    assert c.behind(1.0) is None


def test_lost_events_mean_behind_until_a_relist_ends_and_the_first_why_stays() -> None:
    c = listed()
    c.lost("watch failed (ProtocolError): relisting")
    c.lost("the API server did not answer a probe: ReadTimeoutError")
    assert c.behind(2.0) == "watch failed (ProtocolError): relisting"
    assert c.needs_relist(2.0) is None  # already on its way
    c.listed("140", 3.0)
    assert c.behind(3.0) is None


def test_a_probe_the_stream_does_not_reach_in_time_is_behind_and_wants_a_relist() -> None:
    c = listed()
    c.probed("120", 10.0)
    c.heard("110", 40.0)  # events, but short of 120
    assert c.behind(10.0 + OVERDUE) is None  # a BOOKMARK may still be on its way
    why = c.behind(10.0 + OVERDUE + 1)
    assert why is not None and "not reached resourceVersion 120" in why and "at 110" in why
    assert c.needs_relist(10.0 + OVERDUE + 1) == why


def test_a_bookmark_at_or_past_the_probe_reaches_it() -> None:
    c = listed()
    c.probed("120", 10.0)
    c.probed("130", 20.0)  # the oldest one not reached is what counts
    c.heard("120", 70.0)  # the BOOKMARK: the watch cache's version then
    c.probed("135", 75.0)
    c.heard("135", 100.0)
    assert c.behind(149.0) is None


def test_the_oldest_unreached_probe_is_kept() -> None:
    c = listed()
    c.probed("120", 10.0)
    c.probed("130", 50.0)
    assert c.behind(10.0 + OVERDUE + 1) is not None


def test_a_probe_unanswered_past_its_timeout_is_behind_and_wants_a_relist() -> None:
    c = listed()
    c.asking(10.0)
    assert c.behind(15.0) is None  # within the timeout (5 s)
    why = c.behind(16.0)
    assert why == "the API server has not answered a probe for 6s"
    assert c.needs_relist(16.0) == why
    c.lost(why)
    c.listed("130", 30.0)  # the relist went through: reachable again
    assert c.behind(34.0) is None
    c.probed("131", 34.5)
    assert c.asked_at is None and c.behind(40.0) is None


def test_silence_past_the_bookmark_period_is_behind() -> None:
    c = listed(at=0.0)
    c.heard("101", 30.0)
    assert c.behind(30.0 + OVERDUE) is None
    why = c.behind(30.0 + OVERDUE + 5)
    assert why is not None and why.startswith("no event or BOOKMARK for 80s")


def test_a_relist_that_starts_a_new_history_is_taken_as_it_is() -> None:
    c = listed(rv="5000")
    c.lost("410 Gone: relisting")
    c.listed("12", 1.0)  # etcd restored from a backup: versions start lower
    c.probed("13", 2.0)
    c.heard("13", 3.0)
    assert c.target is None and c.behind(60.0) is None


@pytest.mark.parametrize("rv", ["", None, "abc", "-1", "1.5"])
def test_a_version_that_is_not_a_number_reaches_nothing(rv: str | None) -> None:
    assert version(rv) is None
    c = listed()
    c.probed("120", 0.0)
    c.heard(rv, 1.0)
    assert c.target == (120, 0.0)


@given(
    st.lists(
        st.tuples(st.sampled_from(["heard", "probed", "lost", "listed"]), st.integers(0, 10**6)),
        max_size=40,
    )
)
def test_whatever_happens_a_list_makes_it_current(events: list[tuple[str, int]]) -> None:
    c = Currency()
    at = 0.0
    for kind, rv in events:
        at += 1.0
        if kind == "lost":
            c.lost("x")
        else:
            getattr(c, kind)(str(rv), at)
    top = max([rv for _, rv in events] + [c.seen]) + 1
    c.listed(str(top), at + 1)
    assert c.behind(at + 1) is None
