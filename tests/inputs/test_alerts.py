"""Alertmanager webhooks: the four real captures, including 2019's without fingerprints."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from remediator.inputs.decode import decode
from remediator.inputs.records import AlertSeen, InputError
from remediator.inputs.timefmt import parse_time
from tests.data import CAPTURES

AM = CAPTURES / "alertmanager"


def _alerts(name: str) -> tuple[dict[str, Any], list[AlertSeen]]:
    raw = (AM / name).read_bytes()
    items = decode(raw)
    assert all(isinstance(a, AlertSeen) for a in items)
    return orjson.loads(raw), [a for a in items if isinstance(a, AlertSeen)]


def test_firing_0_25_capture() -> None:
    raw, (a,) = _alerts("firing_alertmanager-0.25_capture.json")
    assert (a.status, a.alertname, a.fingerprint) == ("firing", "XHigh", "2d6ce405ddde004d")
    assert a.labels == raw["alerts"][0]["labels"]
    assert a.annotations == {"summary": "x is 80 on trial gw1s-5"}
    assert a.starts_at == parse_time("2026-11-30T11:07:20.935Z")
    assert a.ends_at is None  # 0001-01-01T00:00:00Z means "not ended"
    assert a.at == a.starts_at  # a firing alert's time is startsAt
    assert a.group_key == raw["groupKey"]


def test_resolved_0_25_capture_same_fingerprint_later_time() -> None:
    _, (firing,) = _alerts("firing_alertmanager-0.25_capture.json")
    _, (resolved,) = _alerts("resolved_alertmanager-0.25_capture.json")
    assert resolved.status == "resolved"
    assert resolved.fingerprint == firing.fingerprint
    assert resolved.ends_at == parse_time("2026-11-30T11:07:22.935Z")
    assert resolved.at == resolved.ends_at  # a resolved alert's time is endsAt
    assert resolved.at - firing.at == pytest.approx(2.0)  # type: ignore[operator]


def test_resolved_kube_state_metrics() -> None:
    _, (a,) = _alerts("resolved_kube_state_metrics_v4.json")
    assert (a.status, a.alertname, a.fingerprint) == ("resolved", "Deployment", "fbab788ec4c1018b")
    assert a.labels["namespace"] == "eric-eo-cm-ci406"
    assert a.at == parse_time("2022-07-29T11:17:27.3Z")


def test_2019_payload_without_fingerprint_or_truncated_alerts() -> None:
    raw, alerts = _alerts("firing_blackbox_icmp_3alerts_v4_2019.json")
    assert "truncatedAlerts" not in raw
    assert all("fingerprint" not in a for a in raw["alerts"])
    assert len(alerts) == 3
    # Nanosecond startsAt (Go's time.Time) parses.
    assert {a.at for a in alerts} == {parse_time("2019-09-27T16:27:56.612666Z")}
    # Derived fingerprints: distinct per label set, stable across decodes, hex like the real ones.
    fps = [a.fingerprint for a in alerts]
    assert len(set(fps)) == 3
    assert fps == [a.fingerprint for a in _alerts("firing_blackbox_icmp_3alerts_v4_2019.json")[1]]
    assert all(len(f) == 16 and int(f, 16) >= 0 for f in fps)
    # ... and the same label set in another order gives the same fingerprint.
    shuffled = copy.deepcopy(raw)
    for alert in shuffled["alerts"]:
        alert["labels"] = dict(reversed(list(alert["labels"].items())))
    assert [a.fingerprint for a in decode(orjson.dumps(shuffled))] == fps  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.update(version="3"), "version '3'"),
        (lambda d: d.update(version=3), "version '3'"),
        (lambda d: d.update(alerts={"a": 1}), "alerts list"),
        (lambda d: d["alerts"][0].update(status="pending"), "neither firing nor resolved"),
        (lambda d: d["alerts"][0].update(startsAt="soon"), "soon"),
    ],
)
def test_bad_payloads(mutate: Any, reason: str) -> None:
    doc = orjson.loads((AM / "firing_alertmanager-0.25_capture.json").read_bytes())
    mutate(doc)
    with pytest.raises(InputError, match=reason):
        decode(orjson.dumps(doc))
