"""The simulated cluster's objects as the API server's JSON: a pod (~6 KB with managedFields,
the shape of a real v1.31 pod grown to what a vLLM Deployment's pod carries), the kubelet's
core/v1 Events about it, and the Deployment. Written straight from the cluster's own
objects (`cluster.Pod`), at the whole seconds the API server writes.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from remediator.inputs.hedge_annotation import HEDGE, Hedge, write_hedges

if TYPE_CHECKING:
    from remediator.sim.fleet.cluster import Pod

JSON = dict[str, Any]
BASE_TIME = 1_740_816_000  # 2025-03-01T08:00:00Z: the simulation's t = 0 as epoch seconds
CONTAINER = "vllm"
GPU_UTIL = "0.85"
GRACE_S = 120  # terminationGracePeriodSeconds
UNSCHEDULABLE = (
    "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
    "available: 8 No preemption victims found for incoming pod."
)
_NS = 1_000_000_000
_rfc3339: dict[int, str] = {}


def wall(t: float) -> float:
    """Virtual seconds → the epoch seconds the API server would write (whole seconds)."""
    return float(BASE_TIME + math.floor(t))


def rfc3339(seconds: int) -> str:
    """metav1.Time: whole seconds, `Z` (kept: a run writes the same few seconds often)."""
    found = _rfc3339.get(seconds)
    if found is None:
        text = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        found = _rfc3339[seconds] = text
    return found


def go_duration(ns: int) -> str:
    """time.Duration.String(): `717ms`, `49.657983991s`, `3m2.5s`, `1h0m3s`."""
    if ns == 0:
        return "0s"
    if ns < _NS:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return _decimal(ns, size) + unit
    hours, rest = divmod(ns, 3600 * _NS)
    minutes, rest = divmod(rest, 60 * _NS)
    secs = _decimal(rest, _NS) + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    return f"{minutes}m{secs}" if minutes else secs


def _decimal(n: int, size: int) -> str:
    whole, frac = divmod(n, size)
    digits = str(frac).rjust(len(str(size)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def pod_ip(index: int) -> str:
    return f"10.244.{index % 250}.{(index // 250) % 250 + 2}"


# ---- the pod -------------------------------------------------------------------------------
def _whole(t: float | None) -> int | None:
    return None if t is None else BASE_TIME + math.floor(t)


def pod_object(p: Pod, stage: str) -> JSON:
    """The pod as a watch event shows it at `stage`: pending, unschedulable, scheduled,
    running or ready (what `wire.pod_record` writes as typed fields)."""
    return {"kind": "Pod", "apiVersion": "v1", "metadata": _metadata(p, stage),
            "spec": _spec(p, stage), "status": _status(p, stage)}  # fmt: skip


def _metadata(p: Pod, stage: str) -> JSON:
    created = rfc3339(BASE_TIME + math.floor(p.created))
    managers = [_manager("kube-controller-manager", "Update", created, None, FIELDS_SPEC)]
    if stage == "unschedulable":
        managers.append(_manager("kube-scheduler", "Update", created, "status", FIELDS_SCHED))
    if stage in ("running", "ready"):
        started, ready = _whole(p.started), _whole(p.ready)
        assert started is not None
        when = rfc3339(started if stage == "running" or ready is None else ready)
        managers.append(_manager("kubelet", "Update", when, "status", FIELDS_KUBELET))
    spec = p.dep.spec
    replicaset = f"{spec.name}-{p.rs_hash}"
    return {
        "name": p.name, "generateName": replicaset + "-", "namespace": spec.namespace,
        "uid": p.uid, "resourceVersion": "1", "creationTimestamp": created,
        "labels": {
            "app": "vllm-inference",
            "app.kubernetes.io/name": spec.name,
            "app.kubernetes.io/component": "inference-server",
            "model": spec.model.split("/")[-1].lower(),
            "pod-template-hash": p.rs_hash,
        },
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "8000",
            "kubectl.kubernetes.io/default-container": CONTAINER,
        },
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset,
                             "uid": p.dep.uid, "controller": True, "blockOwnerDeletion": True}],
        "managedFields": managers,
    }  # fmt: skip


def _manager(name: str, op: str, when: str, sub: str | None, fields: JSON) -> JSON:
    entry: JSON = {"manager": name, "operation": op, "apiVersion": "v1", "time": when,
                   "fieldsType": "FieldsV1", "fieldsV1": fields}  # fmt: skip
    if sub:
        entry["subresource"] = sub
    return entry


def _spec(p: Pod, stage: str) -> JSON:
    spec: JSON = {
        "volumes": [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf-model-cache"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "kube-api-access-" + p.uid[:5], "projected": PROJECTED},
        ],
        "containers": [_container(p)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": GRACE_S,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200", "pool": "inference"},
        "serviceAccountName": "vllm",
        "serviceAccount": "vllm",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": TOLERATIONS,
        "priorityClassName": "inference-high",
        "priority": 100000,
        "enableServiceLinks": False,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if stage not in ("pending", "unschedulable"):
        spec["nodeName"] = p.node.name if p.node is not None else None
    return spec


def _container(p: Pod) -> JSON:
    tp = str(p.dep.spec.tp)
    gpu = {"cpu": "16", "memory": "200Gi", "nvidia.com/gpu": tp}
    return {
        "name": CONTAINER,
        "image": p.image,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--model", p.dep.spec.model, "--tensor-parallel-size", tp,
                 "--gpu-memory-utilization", GPU_UTIL, "--max-model-len", "32768",
                 "--max-num-seqs", "256", "--port", "8000", "--download-dir", "/models"],
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "env": [
            {"name": "HF_HOME", "value": "/models"},
            {"name": "VLLM_WORKER_MULTIPROC_METHOD", "value": "spawn"},
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {"name": "HUGGING_FACE_HUB_TOKEN",
             "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        ],
        "resources": {"limits": gpu, "requests": dict(gpu)},
        "volumeMounts": [
            {"name": "model-cache", "mountPath": "/models"},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "kube-api-access-" + p.uid[:5], "readOnly": True,
             "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
        ],
        "livenessProbe": _probe("/health", 600, 10, 3),
        "readinessProbe": _probe("/health", 30, 5, 3),
        "startupProbe": _probe("/health", 60, 10, 90),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }  # fmt: skip


def _probe(path: str, delay: int, period: int, failures: int) -> JSON:
    return {"httpGet": {"path": path, "port": 8000, "scheme": "HTTP"},
            "initialDelaySeconds": delay, "timeoutSeconds": 5, "periodSeconds": period,
            "successThreshold": 1, "failureThreshold": failures}  # fmt: skip


def _status(p: Pod, stage: str) -> JSON:
    if stage == "pending":
        return {"phase": "Pending", "qosClass": "Guaranteed"}
    if stage == "unschedulable":
        created = rfc3339(BASE_TIME + math.floor(p.created))
        return {"phase": "Pending", "qosClass": "Guaranteed", "conditions": [
            _cond("PodScheduled", "False", created, "Unschedulable", UNSCHEDULABLE)]}  # fmt: skip
    scheduled = _whole(p.scheduled)
    assert scheduled is not None
    sched = _cond("PodScheduled", "True", rfc3339(scheduled))
    if stage == "scheduled":
        return {"phase": "Pending", "qosClass": "Guaranteed", "conditions": [sched]}
    return _kubelet_status(p, stage, scheduled, sched)


def _kubelet_status(p: Pod, stage: str, scheduled: int, sched: JSON) -> JSON:
    ready = _whole(p.ready)
    ready_at = rfc3339(ready) if stage == "ready" and ready is not None else None
    ready_cond = (
        _cond("Ready", "True", ready_at)
        if ready_at
        else _cond("Ready", "False", rfc3339(scheduled), "ContainersNotReady",
                   f"containers with unready status: [{CONTAINER}]")
    )  # fmt: skip
    assert p.node is not None
    host = p.node.name.split(".")[0][3:].replace("-", ".")
    ip = pod_ip(p.index)
    return {
        "phase": "Running",
        "conditions": [
            _cond("PodReadyToStartContainers", "True", rfc3339(scheduled + 1)),
            _cond("Initialized", "True", rfc3339(scheduled)),
            ready_cond,
            {**ready_cond, "type": "ContainersReady"},
            sched,
        ],
        "hostIP": host,
        "hostIPs": [{"ip": host}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": rfc3339(scheduled),
        "containerStatuses": [_container_status(p, ready_at is not None)],
        "qosClass": "Guaranteed",
    }


def _container_status(p: Pod, ready: bool) -> JSON:
    started = _whole(p.started)
    assert started is not None
    digest = p.dep.uid.replace("-", "") * 2
    return {"name": CONTAINER, "lastState": {}, "ready": ready, "restartCount": 0,
            "image": p.image, "imageID": f"docker.io/{p.image.split(':')[0]}@sha256:{digest}",
            "started": True, "state": {"running": {"startedAt": rfc3339(started)}},
            "containerID": "containerd://" + (p.uid.replace("-", "") * 2)}  # fmt: skip


def _cond(ctype: str, status: str, when: str | None, reason: str = "", msg: str = "") -> JSON:
    cond: JSON = {"type": ctype, "status": status, "lastProbeTime": None,
                  "lastTransitionTime": when}  # fmt: skip
    if reason:
        cond["reason"] = reason
    if msg:
        cond["message"] = msg
    return cond


# ---- the kubelet's Events about a pod ------------------------------------------------------
def event_object(p: Pod, reason: str, message: str, at: int, warning: bool) -> JSON:
    """A core/v1 Event as the kubelet's legacy recorder writes it (timestamps set,
    eventTime null), at epoch second `at`, first seen then."""
    spec = p.dep.spec
    # The recorder names an Event `<object>.<hex unix nanos of the first occurrence>`.
    name = f"{p.name}.{at * 1_000_000_000 + len(reason):x}"
    host = p.node.name if p.node is not None else ""
    when = rfc3339(at)
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": name, "namespace": spec.namespace,
                     "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{spec.namespace}/{name}")),
                     "resourceVersion": "1", "creationTimestamp": when},
        "involvedObject": {"kind": "Pod", "namespace": spec.namespace, "name": p.name,
                           "uid": p.uid, "apiVersion": "v1",
                           "resourceVersion": str(100 + p.index),
                           "fieldPath": f"spec.containers{{{CONTAINER}}}"},
        "reason": reason,
        "message": message,
        "source": {"component": "kubelet", "host": host},
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
        "type": "Warning" if warning else "Normal",
        "eventTime": None,
        "reportingComponent": "kubelet",
        "reportingInstance": host,
    }  # fmt: skip


# ---- the Deployment ------------------------------------------------------------------------
def deployment_event(
    name: str, model: str, image: str, *, replicas: int, ready: int, generation: int,
    watch: str, namespace: str, at: int, pods: int | None = None, updated: int | None = None,
    tp: int = 2, hedges: tuple[Hedge, ...] = (),
) -> bytes:  # fmt: skip
    """One watch event of a vLLM Deployment; `generation` moves with its `image`. `pods`:
    its pods of every ReplicaSet (status.replicas), `updated`: of the current one (a rollout
    leaves fewer updated than pods); both `replicas` when not given. `hedges`: the hedge step's
    annotation's entries, while hedges run."""
    container = {"name": CONTAINER, "image": image,
                 "args": ["--model", model, "--tensor-parallel-size", str(tp),
                          "--gpu-memory-utilization", GPU_UTIL],
                 "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}  # fmt: skip
    labels = {"app": "vllm-inference", "model": model.split("/")[-1].lower()}
    when = rfc3339(at)
    obj = {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": namespace,
                     "uid": f"00000000-0000-4000-8000-{name.encode().hex()[:12]:0>12}",
                     "resourceVersion": str(at % 100_000 + generation), "generation": generation,
                     "creationTimestamp": when, "labels": labels,
                     **({"annotations": {HEDGE: write_hedges(hedges)}} if hedges else {})},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
        "status": {
            "observedGeneration": generation,
            "replicas": replicas if pods is None else pods,
            "updatedReplicas": replicas if updated is None else updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [_deployment_cond("Available", ready > 0, when),
                           _deployment_cond("Progressing", True, when)],
        },
    }  # fmt: skip
    return orjson.dumps({"type": watch, "object": obj})


def _deployment_cond(ctype: str, ok: bool, when: str) -> JSON:
    return {"type": ctype, "status": "True" if ok else "False", "lastUpdateTime": when,
            "lastTransitionTime": when}  # fmt: skip


# The parts every vLLM pod of the fleet carries as the API server sends them (shared with
# the test stream generator in tests/simstream: one shape of pod).
PROJECTED: JSON = {
    "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ],
    "defaultMode": 420,
}  # fmt: skip
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
]  # fmt: skip
FIELDS_SPEC: JSON = {
    "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:model": {},
                   "f:app.kubernetes.io/name": {}, "f:app.kubernetes.io/component": {},
                   "f:pod-template-hash": {}},
                   "f:annotations": {".": {}, "f:prometheus.io/scrape": {},
                                     "f:prometheus.io/port": {}},
                   "f:ownerReferences": {".": {}, 'k:{"uid":"..."}': {}}},
    "f:spec": {"f:containers": {'k:{"name":"vllm"}': {
        ".": {}, "f:args": {}, "f:command": {}, "f:env": {".": {}, 'k:{"name":"HF_HOME"}': {
            ".": {}, "f:name": {}, "f:value": {}}}, "f:image": {}, "f:imagePullPolicy": {},
        "f:livenessProbe": {".": {}, "f:httpGet": {".": {}, "f:path": {}, "f:port": {}}},
        "f:name": {}, "f:ports": {".": {}}, "f:readinessProbe": {".": {}},
        "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {},
                                              "f:nvidia.com/gpu": {}}},
        "f:startupProbe": {".": {}}, "f:volumeMounts": {".": {}}}},
        "f:dnsPolicy": {}, "f:nodeSelector": {}, "f:tolerations": {}, "f:volumes": {
            ".": {}, 'k:{"name":"model-cache"}': {".": {}, "f:name": {},
                                                 "f:persistentVolumeClaim": {}}}},
}  # fmt: skip
FIELDS_SCHED: JSON = {"f:status": {"f:conditions": {".": {}, 'k:{"type":"PodScheduled"}': {
    ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:message": {},
    "f:reason": {}, "f:status": {}, "f:type": {}}}}}  # fmt: skip
FIELDS_KUBELET: JSON = {"f:status": {
    "f:conditions": {'k:{"type":"ContainersReady"}': {".": {}, "f:lastProbeTime": {},
                     "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                     'k:{"type":"Initialized"}': {".": {}, "f:status": {}},
                     'k:{"type":"PodReadyToStartContainers"}': {".": {}, "f:status": {}},
                     'k:{"type":"Ready"}': {".": {}, "f:lastTransitionTime": {}, "f:status": {}}},
    "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {},
    "f:podIPs": {".": {}}, "f:startTime": {}}}  # fmt: skip
