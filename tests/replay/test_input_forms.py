"""Inputs as people really hand them over: `kubectl get -o json` without -c, whole namespaces
with ReplicaSets in them, an audit log by mistake, and pods known only from their Events."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from tests.data import CAPTURES
from tests.replay.conftest import run_replay_cli
from tests.timeline.streams import event, pod, watch

K8S = CAPTURES / "k8s"
REDIS_PODS = K8S / "podlist_redis_statefulset_k8s-v1.31_minikube.json"
REDIS_EVENTS = K8S / "eventlist_default_redis_k8s-v1.31_minikube.json"


def _timelines(stdout: str) -> list[dict[str, object]]:
    return [o for o in map(json.loads, stdout.splitlines()) if o["kind"] == "timeline"]


def test_pretty_printed_kubectl_json_is_read_as_documents(tmp_path: Path) -> None:
    """What `kubectl get pods,events -o json` prints (indented, many lines a document),
    and what `kubectl get -w -o json` prints (such documents one after another)."""
    pretty = tmp_path / "pretty.json"
    pretty.write_text(
        json.dumps(json.loads(REDIS_EVENTS.read_bytes()), indent=4) + "\n"
        + json.dumps(json.loads(REDIS_PODS.read_bytes()), indent=4) + "\n"
    )  # fmt: skip
    compact = tmp_path / "compact.jsonl"
    compact.write_bytes(REDIS_EVENTS.read_bytes().replace(b"\n", b"") + b"\n"
                        + orjson.dumps(orjson.loads(REDIS_PODS.read_bytes())) + b"\n")  # fmt: skip
    got = run_replay_cli(["-o", "json", str(pretty)])
    want = run_replay_cli(["-o", "json", str(compact)])
    assert (got.returncode, got.stderr) == (0, "")
    assert _timelines(got.stdout) == _timelines(want.stdout) and len(_timelines(got.stdout)) == 3


def test_a_broken_pretty_document_is_one_clear_error(tmp_path: Path) -> None:
    doc = json.dumps(json.loads(REDIS_PODS.read_bytes()), indent=2).splitlines()
    bad = tmp_path / "bad.json"
    bad.write_text("\n".join(doc[:40]) + "\n")  # cut off mid-document
    r = run_replay_cli([str(bad)])
    assert r.returncode == 1
    errors = r.stderr.strip().splitlines()
    assert len(errors) == 1, errors
    assert f"{bad}:1: skipped" in errors[0] and "jq -c" in errors[0]


def test_replicasets_and_other_kinds_we_do_not_use_are_ignored(tmp_path: Path) -> None:
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "redis-7c9d5b6f4", "namespace": "default", "uid": "rs-1"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "r"}]}}},
        "status": {"replicas": 1},
    }
    f = tmp_path / "all.jsonl"
    f.write_bytes(
        orjson.dumps(rs) + b"\n"
        + orjson.dumps({"type": "ADDED", "object": rs}) + b"\n"
        + orjson.dumps({"kind": "List", "apiVersion": "v1", "items": [
            rs, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}]}) + b"\n"
        + REDIS_PODS.read_bytes().replace(b"\n", b"") + b"\n"
    )  # fmt: skip
    r = run_replay_cli(["-o", "json", str(f)])
    assert (r.returncode, r.stderr) == (0, "")
    assert len(_timelines(r.stdout)) == 2


def test_an_audit_log_line_says_what_it_is(tmp_path: Path) -> None:
    audit = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "7e0cbcfc-0b86-4e8f-9a3e-1f0c8a1b9d2e",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/llm/pods/vllm-0",
        "verb": "delete",
        "objectRef": {"resource": "pods", "namespace": "llm", "name": "vllm-0"},
        "responseStatus": {"code": 200},
    }
    f = tmp_path / "audit.jsonl"
    f.write_bytes(orjson.dumps(audit) + b"\n")
    r = run_replay_cli([str(f)])
    assert r.returncode == 1
    assert "audit log entry (audit.k8s.io)" in r.stderr
    assert "involvedObject" not in r.stderr


def test_text_counts_pods_known_only_from_events_like_json(tmp_path: Path) -> None:
    f = tmp_path / "events-only.jsonl"
    lonely = event("Pulling", 'Pulling image "x"', 3, name="lonely", uid=None)  # no pod
    f.write_bytes(orjson.dumps(watch(lonely)) + b"\n" + orjson.dumps(watch(pod(scheduled=1))))
    as_json = run_replay_cli(["-o", "json", str(f)])
    as_text = run_replay_cli([str(f)])
    n = len(_timelines(as_json.stdout))
    assert n == 2
    assert as_text.stdout.startswith(f"{n} pods, ")
    assert "llm/lonely" in as_text.stdout
