"""RFC 3339 timestamps (Time and MicroTime) and Go durations, as Kubernetes writes them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from remediator.inputs.timefmt import format_time, parse_go_duration, parse_time, parse_time_or_none

# 2024-11-17T10:39:45Z, the redis-0 FailedScheduling of the real EventList, as epoch seconds:
# 20044 days from 1970-01-01 to 2024-11-17 → 20044*86400 = 1731801600, + 10:39:45 = 38385 s.
BASE = 20044 * 86400 + 10 * 3600 + 39 * 60 + 45


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-11-17T10:39:45Z", BASE),  # metav1.Time
        ("2024-11-17T10:39:45.123456Z", BASE + 0.123456),  # metav1.MicroTime (eventTime)
        ("2024-11-17T10:39:45.1Z", BASE + 0.1),
        ("2024-11-17T10:39:45.000000Z", BASE),
        ("2024-11-17T12:39:45+02:00", BASE),  # offset east of UTC
        ("2024-11-17T05:09:45-05:30", BASE),  # offset west, with minutes
        ("2024-11-17T10:39:45+00:00", BASE),
        ("2024-11-17T10:39:45.5-00:00", BASE + 0.5),
        ("2024-11-17t10:39:45Z", BASE),  # RFC 3339 §5.6: T may be lower case
        ("2024-11-17T10:39:45z", BASE),  # ... and so may Z
        # Alertmanager (Go) writes nanoseconds: precision beyond µs is dropped, not an error.
        ("2019-09-27T16:27:56.612666101Z", 1569601676.612666),
    ],
)
def test_rfc3339_forms(text: str, expected: float) -> None:
    assert parse_time(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "2024-11-17T10:39:45",  # no zone: ambiguous, refused rather than guessed as local
        "2024-11-17",
        "yesterday at noon",
        "1731839985",
        "",
        "2024-13-17T10:39:45Z",
        "2024-11-17T25:39:45Z",
    ],
)
def test_not_rfc3339(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time(text)


def test_optional_time() -> None:
    assert parse_time_or_none(None) is None
    assert parse_time_or_none("") is None
    assert parse_time_or_none("2024-11-17T10:39:45Z") == BASE
    with pytest.raises(ValueError):
        parse_time_or_none(1731839985)


def test_format_round_trip() -> None:
    assert format_time(BASE) == "2024-11-17T10:39:45Z"
    assert format_time(BASE + 0.25) == "2024-11-17T10:39:45.250Z"
    assert parse_time(format_time(BASE + 0.25)) == BASE + 0.25
    assert datetime.fromtimestamp(BASE, tz=UTC).isoformat() == "2024-11-17T10:39:45+00:00"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("49.657983991s", 49.657983991),
        ("13.996s", 13.996),
        ("1.629s", 1.629),
        ("717ms", 0.717),
        ("1m2.5s", 62.5),
        ("2m1.5s", 121.5),
        ("3m2s", 182.0),
        ("1h2m3.5s", 3723.5),
        ("2h0m0s", 7200.0),
        ("1h0m0.001s", 3600.001),
        ("1.5µs", 1.5e-6),  # U+00B5 MICRO SIGN, what Go prints
        ("1.5μs", 1.5e-6),  # U+03BC GREEK SMALL LETTER MU
        ("1.5us", 1.5e-6),
        ("250ns", 250e-9),
        ("0s", 0.0),
        ("0", 0.0),
        ("-1.5s", -1.5),
        ("1m", 60.0),
        (".5s", 0.5),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("text", ["", "s", "1", "1x", "1.5", "1m2", "m1s", "1s 2s", "1d", "-"])
def test_not_go_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_duration(text)
