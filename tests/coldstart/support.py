"""Recorded streams → the snapshot `kubectl coldstart` would have taken at a moment."""

from __future__ import annotations

from pathlib import Path

from remediator.coldstart.snapshot import Snapshot
from remediator.coldstart.target import Target
from remediator.inputs.decode import decode
from remediator.inputs.records import PodSeen
from remediator.inputs.timefmt import parse_time
from remediator.replay import _lines
from remediator.timeline.tracker import Tracker

REPO = Path(__file__).resolve().parents[2]
HUNG = REPO / "tests/data/cluster/hung-engine-init.jsonl"
STEPS = REPO / "examples/engine-init-steps.jsonl"
INCIDENT = REPO / "examples/incident-70b.jsonl"
REDIS_PODS = REPO / "tests/data/captures/k8s/podlist_redis_statefulset_k8s-v1.31_minikube.json"
REDIS_EVENTS = REPO / "tests/data/captures/k8s/eventlist_default_redis_k8s-v1.31_minikube.json"


def snapshot_of(*paths: Path, until: str | None = None, namespace: str = "") -> Snapshot:
    """What a list at `until` would have held: the recording's inputs up to then, fed to a
    fresh Tracker in file order (replay's reader), the pods seen being the ones asked about."""
    limit = parse_time(until) if until else None
    snap = Snapshot(Tracker(), namespace, Target())
    for _, _, line in _lines([str(p) for p in paths]):
        items = [i for i in decode(line) if limit is None or i.at is None or i.at <= limit]
        for item in items:
            if isinstance(item, PodSeen) and (not namespace or item.namespace == namespace):
                snap.uids.add(item.uid)
        snap.feed(items)
    snap.at = limit
    return snap
