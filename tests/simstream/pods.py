"""Pod objects as the API server sends them in a watch: ~6 KB with managedFields.

The shape follows a real v1.31 pod (tests/data/captures/k8s/podlist_*) grown to what a
vLLM Deployment's pod carries: GPU limits, probes, volumes, tolerations, nodeSelector.
"""

from __future__ import annotations

from typing import Any

from remediator.sim.fleet.kube import (
    FIELDS_KUBELET,
    FIELDS_SCHED,
    FIELDS_SPEC,
    PROJECTED,
    TOLERATIONS,
)
from tests.sharing import own_copy
from tests.simstream.forms import rfc3339
from tests.simstream.plan import PodPlan

JSON = dict[str, Any]
# The module-level parts below go into every pod as copies: a pod built here shares no list
# or dict with the next one, so a test may change what it built (tests/sharing.py).
# Lifecycle stages, in order, each one watch event.
STAGES = ("pending", "unschedulable", "scheduled", "creating", "running", "ready")
CONTAINER = "vllm"


def pod_object(p: PodPlan, stage: str, resource_version: int) -> JSON:
    meta = _metadata(p, stage, resource_version)
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": _spec(p, stage),
            "status": _status(p, stage)}  # fmt: skip


def _metadata(p: PodPlan, stage: str, rv: int) -> JSON:
    created = rfc3339(p.created)
    managers = [_manager("kube-controller-manager", "Update", created, None, FIELDS_SPEC)]
    if stage == "unschedulable":
        managers.append(_manager("kube-scheduler", "Update", created, "status", FIELDS_SCHED))
    if stage in ("creating", "running", "ready"):
        assert p.scheduled is not None
        when = rfc3339(_kubelet_update(p, stage))
        managers.append(_manager("kubelet", "Update", when, "status", FIELDS_KUBELET))
    return {
        "name": p.name,
        "generateName": p.replicaset + "-",
        "namespace": p.namespace,
        "uid": p.uid,
        "resourceVersion": str(rv),
        "creationTimestamp": created,
        "labels": {
            "app": "vllm-inference",
            "app.kubernetes.io/name": p.deployment,
            "app.kubernetes.io/component": "inference-server",
            "model": p.model.split("/")[-1].lower(),
            "pod-template-hash": p.replicaset.rsplit("-", 1)[-1],
        },
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "8000",
            "kubectl.kubernetes.io/default-container": CONTAINER,
        },
        "ownerReferences": [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": p.replicaset,
                "uid": p.rs_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],  # fmt: skip
        "managedFields": managers,
    }


def _kubelet_update(p: PodPlan, stage: str) -> int:
    assert p.scheduled is not None and p.started is not None
    if stage == "creating":
        return p.scheduled + 1
    return p.started if stage == "running" or p.ready is None else p.ready


def _manager(name: str, op: str, when: str, sub: str | None, fields: JSON) -> JSON:
    entry: JSON = {"manager": name, "operation": op, "apiVersion": "v1", "time": when,
                   "fieldsType": "FieldsV1", "fieldsV1": own_copy(fields)}  # fmt: skip
    if sub:
        entry["subresource"] = sub
    return entry


def _spec(p: PodPlan, stage: str) -> JSON:
    spec: JSON = {
        "volumes": [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": "hf-model-cache"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "kube-api-access-" + p.uid[:5], "projected": own_copy(PROJECTED)},
        ],
        "containers": [_container(p)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 120,
        "dnsPolicy": "ClusterFirst",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200", "pool": "inference"},
        "serviceAccountName": "vllm",
        "serviceAccount": "vllm",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": own_copy(TOLERATIONS),
        "priorityClassName": "inference-high",
        "priority": 100000,
        "enableServiceLinks": False,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if stage not in ("pending", "unschedulable"):
        spec["nodeName"] = p.node
    return spec


def _container(p: PodPlan) -> JSON:
    gpu = {"cpu": "16", "memory": "200Gi", "nvidia.com/gpu": "2"}
    return {
        "name": CONTAINER,
        "image": p.image,
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": [
            "--model",
            p.model,
            "--tensor-parallel-size",
            "2",
            "--gpu-memory-utilization",
            p.gpu_util,
            "--max-model-len",
            "32768",
            "--max-num-seqs",
            "256",
            "--port",
            "8000",
            "--download-dir",
            "/models",
        ],  # fmt: skip
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "env": [
            {"name": "HF_HOME", "value": "/models"},
            {"name": "VLLM_WORKER_MULTIPROC_METHOD", "value": "spawn"},
            {"name": "NCCL_DEBUG", "value": "WARN"},
            {
                "name": "HUGGING_FACE_HUB_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
            },
        ],  # fmt: skip
        "resources": {"limits": gpu, "requests": dict(gpu)},
        "volumeMounts": [
            {"name": "model-cache", "mountPath": "/models"},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {
                "name": "kube-api-access-" + p.uid[:5],
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],  # fmt: skip
        "livenessProbe": _probe("/health", 600, 10, 3),
        "readinessProbe": _probe("/health", 30, 5, 3),
        "startupProbe": _probe("/health", 60, 10, 90),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def _probe(path: str, delay: int, period: int, failures: int) -> JSON:
    return {"httpGet": {"path": path, "port": 8000, "scheme": "HTTP"},
            "initialDelaySeconds": delay, "timeoutSeconds": 5, "periodSeconds": period,
            "successThreshold": 1, "failureThreshold": failures}  # fmt: skip


def _status(p: PodPlan, stage: str) -> JSON:
    if stage == "pending":
        return {"phase": "Pending", "qosClass": "Guaranteed"}
    created = rfc3339(p.created)
    if stage == "unschedulable":
        message = (
            "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: 0/8 nodes are "
            "available: 8 No preemption victims found for incoming pod."
        )
        return {"phase": "Pending", "qosClass": "Guaranteed", "conditions": [
            _cond("PodScheduled", "False", created, "Unschedulable", message)]}  # fmt: skip
    assert p.scheduled is not None
    sched = _cond("PodScheduled", "True", rfc3339(p.scheduled))
    if stage == "scheduled":
        return {"phase": "Pending", "qosClass": "Guaranteed", "conditions": [sched]}
    return _kubelet_status(p, stage, sched)


def _kubelet_status(p: PodPlan, stage: str, sched: JSON) -> JSON:
    assert p.scheduled is not None and p.started is not None
    sandbox = rfc3339(p.scheduled + 1)
    ready_at = rfc3339(p.ready) if stage == "ready" and p.ready is not None else None
    not_ready = rfc3339(p.scheduled)
    ready = (
        _cond("Ready", "True", ready_at)
        if ready_at
        else _cond("Ready", "False", not_ready, "ContainersNotReady",
                   f"containers with unready status: [{CONTAINER}]")
    )  # fmt: skip
    containers_ready = {**ready, "type": "ContainersReady"}
    running = stage != "creating"
    conditions = [
        _cond("PodReadyToStartContainers", "True" if running else "False", sandbox),
        _cond("Initialized", "True", rfc3339(p.scheduled)),
        ready,
        containers_ready,
        sched,
    ]
    return {
        "phase": "Running" if running else "Pending",
        "conditions": conditions,
        "hostIP": _host_ip(p),
        "hostIPs": [{"ip": _host_ip(p)}],
        **({"podIP": _pod_ip(p), "podIPs": [{"ip": _pod_ip(p)}]} if running else {}),
        "startTime": rfc3339(p.scheduled),
        "containerStatuses": [_container_status(p, stage, ready_at is not None)],
        "qosClass": "Guaranteed",
    }


def _container_status(p: PodPlan, stage: str, ready: bool) -> JSON:
    status: JSON = {"name": CONTAINER, "lastState": {}, "ready": ready, "restartCount": 0,
                    "image": p.image, "imageID": "", "started": stage != "creating"}  # fmt: skip
    if stage == "creating":
        status["state"] = {"waiting": {"reason": "ContainerCreating"}}
        return status
    assert p.started is not None
    status["state"] = {"running": {"startedAt": rfc3339(p.started)}}
    digest = p.rs_uid.replace("-", "") * 2
    status["imageID"] = f"docker.io/{p.image.split(':')[0]}@sha256:{digest}"
    status["containerID"] = "containerd://" + (p.uid.replace("-", "") * 2)
    return status


def _cond(ctype: str, status: str, when: str | None, reason: str = "", msg: str = "") -> JSON:
    cond: JSON = {"type": ctype, "status": status, "lastProbeTime": None,
                  "lastTransitionTime": when}  # fmt: skip
    if reason:
        cond["reason"] = reason
    if msg:
        cond["message"] = msg
    return cond


def _host_ip(p: PodPlan) -> str:
    assert p.node is not None
    return p.node.split(".")[0][3:].replace("-", ".")


def _pod_ip(p: PodPlan) -> str:
    return f"10.244.{p.index % 250}.{(p.index // 250) % 250 + 2}"
