"""A stand-in Kubernetes API server for tests: real HTTP on 127.0.0.1, real client.

The real `kubernetes` Python client talks to it through a generated kubeconfig.
It keeps objects in memory, keyed by (group/version, plural, namespace, name),
answers through a route table (collection/item x method), and returns the
Status objects the real API server returns (NotFound, Conflict, AlreadyExists).

Grow it by adding a `Resource` to `RESOURCES`, a handler to `_ROUTES`, or a
read hook (a stand-in controller: `DaemonSetRollout` moves a rollout along each
time the DaemonSet is read). Every request is recorded for assertions.

Watches (`?watch=true` on a collection) stream JSON lines `{"type", "object"}` over
chunked HTTP like the API server: from `resourceVersion` on (replayed from the
store's change log), BOOKMARKs when `allowWatchBookmarks=true`, and an ERROR event
with a 410 Expired Status when the version is older than the log keeps
(`store.compact()` forgets history; `close_watches()` ends every open stream).

Since the real control plane runs under tests/live (tests/cluster), this stand-in is kept only
where it still earns its keep: fast, exact fault injection a real server cannot be asked for
(a 410 ERROR event mid-stream, a stream cut after N bytes, 500 and 403 bursts on a watch, a
DaemonSet rollout that never finishes) and the runtime tests that need them in milliseconds.
Every flow it serves also runs against the real API server in tests/live.

    with KubeApiServer() as api:
        api.store.create(pod("llm", "vllm-0"))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.sharing import fresh
from tests.standins.pod_logs import PodLogs

Obj = dict[str, Any]
Key = tuple[str, str, str | None, str]  # (group/version, plural, namespace, name)


@dataclass(frozen=True, slots=True)
class Resource:
    group_version: str  # "v1", "apps/v1"
    plural: str
    kind: str
    namespaced: bool
    generation: bool = False  # spec changes bump metadata.generation (workloads)

    @property
    def group(self) -> str:
        return self.group_version.split("/")[0] if "/" in self.group_version else ""

    @property
    def qualified(self) -> str:  # "pods", "daemonsets.apps": how errors name it
        return f"{self.plural}.{self.group}" if self.group else self.plural


RESOURCES: tuple[Resource, ...] = (
    Resource("v1", "pods", "Pod", True),
    Resource("v1", "nodes", "Node", False),
    Resource("v1", "namespaces", "Namespace", False),
    Resource("v1", "events", "Event", True),
    Resource("apps/v1", "daemonsets", "DaemonSet", True, generation=True),
    Resource("apps/v1", "deployments", "Deployment", True, generation=True),
    Resource("apps/v1", "statefulsets", "StatefulSet", True, generation=True),
    Resource("coordination.k8s.io/v1", "leases", "Lease", True),
)
_BY_PATH = {(r.group_version, r.plural): r for r in RESOURCES}
_BY_KIND = {(r.group_version, r.kind): r for r in RESOURCES}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    """Answered as a Status object with this code."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> Obj:
        body: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(res: Resource, name: str) -> Obj:
    d: Obj = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    return d


def not_found(res: Resource, name: str) -> ApiError:
    msg = f'{res.qualified} "{name}" not found'
    return ApiError(404, "NotFound", msg, _details(res, name))


def conflict(res: Resource, name: str, why: str) -> ApiError:
    msg = f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}'
    return ApiError(409, "Conflict", msg, _details(res, name))


# --- selectors -------------------------------------------------------------------

_SET_TERM = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_TERM = re.compile(r"^\s*([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)([\w./-]+)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses: "a in (x,y),b=c" -> two terms."""
    terms, depth, cur = [], 0, ""
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += ch
    return [t for t in [*terms, cur] if t.strip()]


def _term_matches(term: str, labels: dict[str, str]) -> bool:
    if m := _SET_TERM.match(term):
        key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
        return (labels.get(key) in values) == (op == "in") if key in labels else op == "notin"
    if m := _EQ_TERM.match(term):
        key, op, value = m.groups()
        return (labels.get(key) == value) if op != "!=" else labels.get(key) != value
    if m := _EXISTS_TERM.match(term):
        return (m.group(2) in labels) != (m.group(1) == "!")
    raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")


def label_selector_matches(selector: str, labels: dict[str, str]) -> bool:
    return all(_term_matches(t, labels) for t in _split_terms(selector))


def _field(obj: Obj, path: str) -> str | None:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return None if cur is None else str(cur)


def field_selector_matches(selector: str, obj: Obj) -> bool:
    for term in _split_terms(selector):
        m = re.match(r"^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}")
        equal = (_field(obj, m.group(1)) or "") == m.group(3)
        if equal != (m.group(2) != "!="):
            return False
    return True


# --- patches -----------------------------------------------------------------------

# Strategic merge: lists of these fields merge by the named key (the subset we use).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "conditions": "type",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge_patch(target: Any, patch: Any, field_name: str | None = None) -> Any:
    if isinstance(patch, list) and field_name in MERGE_KEYS and isinstance(target, list):
        return _merge_list(target, patch, MERGE_KEYS[field_name])
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = strategic_merge_patch(out.get(k), v, k)
    return out


def _merge_list(target: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(i) for i in target]
    for item in patch:
        at = next((n for n, t in enumerate(out) if t.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del out[at]
        elif at is None:
            out.append(copy.deepcopy(item))
        else:
            out[at] = strategic_merge_patch(out[at], item)
    return out


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def json_patch(target: Obj, ops: list[Obj]) -> Obj:
    """RFC 6902: add, replace, remove, test (enough for what clients send us)."""
    doc = copy.deepcopy(target)
    for op in ops:
        *parents, last = _pointer(op["path"])
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        kind = op["op"]
        if kind == "test" and node.get(last) != op.get("value"):
            raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        if kind in ("add", "replace"):
            if isinstance(node, list):
                node.insert(len(node) if last == "-" else int(last), op["value"])
            else:
                node[last] = op["value"]
        elif kind == "remove":
            del node[int(last) if isinstance(node, list) else last]
    return doc


_PATCHERS: dict[str, Callable[[Obj, Any], Obj]] = {
    "application/strategic-merge-patch+json": strategic_merge_patch,
    "application/merge-patch+json": merge_patch,
    "application/json-patch+json": json_patch,
}


# --- the store ---------------------------------------------------------------------

ReadHook = Callable[[Obj], None]


class Store:
    """Objects by key, with resourceVersion, uid, generation kept like the API does."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[Key, Obj] = {}
        self.read_hooks: dict[Key, list[ReadHook]] = {}
        self._rv = 1000
        # Watch support: every change, oldest first, as (rv, type, resource, object).
        self.changes: list[tuple[int, str, Resource, Obj]] = []
        self.compacted_rv = 0  # a watch from an older version gets 410 Gone
        self.changed = threading.Condition(self.lock)

    def _log(self, kind: str, res: Resource, obj: Obj) -> None:
        self.changes.append(
            (int(obj["metadata"]["resourceVersion"]), kind, res, copy.deepcopy(obj))
        )
        self.changed.notify_all()

    def compact(self) -> None:
        """Forget the change log, as etcd compaction does: older watches get 410."""
        with self.lock:
            self.compacted_rv = self._rv
            self.changes.clear()

    @property
    def current_rv(self) -> int:
        return self._rv

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def resource_of(self, obj: Obj) -> Resource:
        res = _BY_KIND.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if res is None:
            raise ValueError(
                f"stand-in has no resource for {obj.get('apiVersion')}/{obj.get('kind')}"
            )
        return res

    @staticmethod
    def key(res: Resource, namespace: str | None, name: str) -> Key:
        return (res.group_version, res.plural, namespace if res.namespaced else None, name)

    def create(self, obj: Obj, namespace: str | None = None) -> Obj:
        res = self.resource_of(obj)
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        k = self.key(res, meta.get("namespace"), meta["name"])
        with self.lock:
            if k in self.objects:
                msg = f'{res.qualified} "{meta["name"]}" already exists'
                raise ApiError(409, "AlreadyExists", msg, _details(res, meta["name"]))
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", _now())
            meta["resourceVersion"] = self._next_rv()
            if res.generation:
                meta.setdefault("generation", 1)
            self.objects[k] = obj
            self._log("ADDED", res, obj)
            return copy.deepcopy(obj)

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        k = self.key(res, namespace, name)
        with self.lock:
            obj = self.objects.get(k)
            if obj is None:
                raise not_found(res, name)
            for hook in self.read_hooks.get(k, []):
                hook(obj)
            return copy.deepcopy(obj)

    def list(
        self, res: Resource, namespace: str | None, labels: str | None, fields: str | None
    ) -> list[Obj]:
        with self.lock:
            found = [
                copy.deepcopy(o)
                for (gv, plural, ns, _), o in sorted(self.objects.items(), key=lambda i: str(i[0]))
                if (gv, plural) == (res.group_version, res.plural)
                and (namespace is None or ns == namespace)
            ]
        return [
            o
            for o in found
            if (not labels or label_selector_matches(labels, o["metadata"].get("labels", {})))
            and (not fields or field_selector_matches(fields, o))
        ]

    def update(self, res: Resource, namespace: str | None, name: str, new: Obj, dry: bool) -> Obj:
        """Store `new` over the current object, keeping identity, counting versions."""
        k = self.key(res, namespace, name)
        with self.lock:
            old = self.objects.get(k)
            if old is None:
                raise not_found(res, name)
            want_rv = new.get("metadata", {}).get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                why = (
                    "the object has been modified; please apply your changes "
                    "to the latest version and try again"
                )
                raise conflict(res, name, why)
            new = copy.deepcopy(new)
            meta = new.setdefault("metadata", {})
            for fixed in ("name", "namespace", "uid", "creationTimestamp", "generation"):
                if fixed in old["metadata"]:
                    meta[fixed] = old["metadata"][fixed]
            if res.generation and new.get("spec") != old.get("spec"):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
            new["status"] = new.get("status", old.get("status"))
            if dry:
                return new
            meta["resourceVersion"] = self._next_rv()
            self.objects[k] = new
            self._log("MODIFIED", res, new)
            return copy.deepcopy(new)

    def delete(
        self, res: Resource, namespace: str | None, name: str, options: Obj, dry: bool
    ) -> Obj:
        k = self.key(res, namespace, name)
        with self.lock:
            obj = self.objects.get(k)
            if obj is None:
                raise not_found(res, name)
            pre = options.get("preconditions") or {}
            meta = obj["metadata"]
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                storage_key = f"/registry/{res.qualified}/{meta.get('namespace', '')}/{name}"
                why = (
                    f"StorageError: invalid object, Code: 4, Key: {storage_key}, "
                    f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
                    f"UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}"
                )
                raise conflict(res, name, why)
            rv = pre.get("resourceVersion")
            if rv and rv != meta["resourceVersion"]:
                why = (
                    f"Precondition failed: ResourceVersion in precondition: {rv}, "
                    f"ResourceVersion in object meta: {meta['resourceVersion']}"
                )
                raise conflict(res, name, why)
            gone = copy.deepcopy(obj)
            gone["metadata"]["deletionTimestamp"] = _now()
            grace = options.get("gracePeriodSeconds")
            if grace is not None:
                gone["metadata"]["deletionGracePeriodSeconds"] = grace
            if not dry:
                del self.objects[k]  # the kubelet's part is instant here
                self.read_hooks.pop(k, None)
                gone["metadata"]["resourceVersion"] = self._next_rv()
                self._log("DELETED", res, gone)
            return gone

    def on_read(self, res: Resource, namespace: str | None, name: str, hook: ReadHook) -> None:
        with self.lock:
            self.read_hooks.setdefault(self.key(res, namespace, name), []).append(hook)


# --- stand-in controllers -------------------------------------------------------------


@dataclass
class DaemonSetRollout:
    """The DaemonSet controller, one step per read: a new generation is observed on
    the first read after it appears, then pods update over `finish_after` reads.
    `finish_after=None` never finishes (one pod stuck, like an ImagePullBackOff);
    `observe=False` never even observes the new generation (controller down)."""

    desired: int
    finish_after: int | None = 3
    observe: bool = True
    reads: int = 0
    _generation: int | None = None
    _since: int = 0

    def __call__(self, ds: Obj) -> None:
        self.reads += 1
        gen = ds["metadata"].get("generation", 1)
        status = ds.setdefault("status", {})
        if self._generation is None:  # the state it was created in: rolled out
            self._generation = gen
            self._complete(status, gen)
            return
        if gen != self._generation:
            if not self.observe:
                return
            self._generation, self._since = gen, 0
        self._since += 1
        status["observedGeneration"] = gen
        if self.finish_after is not None and self._since >= self.finish_after:
            self._complete(status, gen)
            return
        steps = self.finish_after or self.desired
        updated = min(self.desired - 1, self.desired * self._since // max(steps, 1))
        status.update(
            updatedNumberScheduled=updated,
            numberAvailable=self.desired - 1,
            numberReady=self.desired - 1,
            numberUnavailable=1,
        )

    def _complete(self, status: Obj, gen: int) -> None:
        status.update(
            observedGeneration=gen,
            currentNumberScheduled=self.desired,
            desiredNumberScheduled=self.desired,
            numberMisscheduled=0,
            numberReady=self.desired,
            updatedNumberScheduled=self.desired,
            numberAvailable=self.desired,
            numberUnavailable=0,
        )


# --- HTTP --------------------------------------------------------------------------------

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?"
    r"(?:/(?P<sub>status))?$"
)


@dataclass(frozen=True, slots=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    res: Resource
    namespace: str | None
    name: str | None
    query: dict[str, list[str]]
    content_type: str
    body: Any

    def arg(self, key: str) -> str | None:
        return self.query.get(key, [None])[0]

    @property
    def dry(self) -> bool:
        return self.arg("dryRun") == "All"


@dataclass
class Fault:
    """Answer matching requests with an error instead (e.g. 500, 403), `times` times,
    after letting the first `after` matching requests through."""

    method: str
    path_pattern: str
    code: int
    reason: str = "InternalError"
    times: int = 1
    after: int = 0


def _list(store: Store, r: Request) -> tuple[int, Obj]:
    items = store.list(r.res, r.namespace, r.arg("labelSelector"), r.arg("fieldSelector"))
    body = {
        "kind": f"{r.res.kind}List",
        "apiVersion": r.res.group_version,
        "metadata": {"resourceVersion": str(store._rv)},
        "items": items,
    }
    return 200, body


def _create(store: Store, r: Request) -> tuple[int, Obj]:
    if not isinstance(r.body, dict):
        raise ApiError(400, "BadRequest", "request body must be an object")
    if r.dry:
        return 201, {**r.body}
    return 201, store.create(r.body, r.namespace)


def _get(store: Store, r: Request) -> tuple[int, Obj]:
    assert r.name is not None
    return 200, store.get(r.res, r.namespace, r.name)


def _patch(store: Store, r: Request) -> tuple[int, Obj]:
    assert r.name is not None
    patcher = _PATCHERS.get(r.content_type)
    if patcher is None:
        msg = (
            "the body of the request was in an unknown format - accepted media types "
            f"include: {', '.join(_PATCHERS)}"
        )
        raise ApiError(415, "UnsupportedMediaType", msg)
    current = store.get(r.res, r.namespace, r.name)
    try:
        patched = patcher(current, r.body)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise ApiError(422, "Invalid", f"patch could not be applied: {e}") from e
    return 200, store.update(r.res, r.namespace, r.name, patched, r.dry)


# MicroTime as the API server parses it (layout 2006-01-02T15:04:05.000000Z07:00):
# exactly six fractional digits; a time without them is a 400, not a default.
_MICRO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(?:Z|[+-]\d{2}:\d{2})")


def _check_lease(body: Any) -> None:
    spec = body.get("spec") or {} if isinstance(body, dict) else {}
    for key in ("acquireTime", "renewTime"):
        value = spec.get(key)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.fullmatch(value)):
            raise ApiError(
                400,
                "BadRequest",
                f'Lease in version "v1" cannot be handled as a Lease: parsing time {value!r} '
                'as "2006-01-02T15:04:05.000000Z07:00"',
            )
    for key in ("leaseDurationSeconds", "leaseTransitions"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ApiError(400, "BadRequest", f"spec.{key}: expected an integer, got {value!r}")


def _put(store: Store, r: Request) -> tuple[int, Obj]:
    assert r.name is not None
    if r.res.plural == "leases":
        _check_lease(r.body)
    return 200, store.update(r.res, r.namespace, r.name, r.body, r.dry)


def _delete(store: Store, r: Request) -> tuple[int, Obj]:
    assert r.name is not None
    gone = store.delete(r.res, r.namespace, r.name, r.body or {}, r.dry)
    if r.res.plural == "pods":  # pods answer with the object, marked for deletion
        return 200, gone
    return 200, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**_details(r.res, r.name), "uid": gone["metadata"]["uid"]},
    }


Handler = Callable[[Store, Request], tuple[int, Obj]]
_ROUTES: dict[tuple[str, str], Handler] = {
    ("GET", "collection"): _list,
    ("POST", "collection"): _create,
    ("GET", "item"): _get,
    ("PATCH", "item"): _patch,
    ("PUT", "item"): _put,
    ("DELETE", "item"): _delete,
}


class KubeApiServer:
    """The server: start it (context manager), seed `store`, point a kubeconfig at it."""

    def __init__(self, token: str | None = "stand-in-token") -> None:
        self.store = Store()
        self.logs = PodLogs()
        self.token = token
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self.bookmark_interval_s = 0.5  # idle time between BOOKMARKs on a watch that asks
        self.raw_events: list[tuple[Resource, Any]] = []  # see send_raw_event
        self._watch_epoch = 0  # close_watches() bumps it; open streams end
        self._closing = False
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> KubeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing = True
        self.logs.closing = True
        self.logs.wake()
        self.close_watches()
        self._httpd.shutdown()
        self._httpd.server_close()

    def close_watches(self) -> None:
        """End every open watch stream (an API server restart, a load balancer timeout)."""
        with self.store.lock:
            self._watch_epoch += 1
            self.store.changed.notify_all()

    def send_raw_event(self, group_version: str, plural: str, line: Any) -> None:
        """Send `line` (any JSON value) as one line on the next open watch of that resource:
        a malformed event (`{"type": "MODIFIED", "object": "x"}`) no real API server can be
        asked for, but a proxy or a bug between could send."""
        with self.store.lock:
            self.raw_events.append((self.resource(group_version, plural), line))
            self.store.changed.notify_all()

    def write_kubeconfig(self, path: Path) -> Path:
        user: Obj = {"token": self.token} if self.token else {}
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "stand-in", "cluster": {"server": self.url}}],
            "users": [{"name": "stand-in", "user": user}],
            "contexts": [
                {"name": "stand-in", "context": {"cluster": "stand-in", "user": "stand-in"}}
            ],
            "current-context": "stand-in",
        }
        path.write_text(json.dumps(cfg))  # JSON is YAML: the client's loader reads it
        return path

    # seeding and inspection

    def resource(self, group_version: str, plural: str) -> Resource:
        return _BY_PATH[(group_version, plural)]

    def daemonset_rollout(self, namespace: str, name: str, rollout: DaemonSetRollout) -> None:
        self.store.on_read(self.resource("apps/v1", "daemonsets"), namespace, name, rollout)

    def sent(self, method: str | None = None, path_contains: str = "") -> list[Recorded]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and path_contains in r.path
        ]

    # dispatch

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Obj]:
        url = urlsplit(raw_path)
        query = parse_qs(url.query)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.requests.append(Recorded(method, url.path, query, headers, body))
        try:
            self._authorize(headers)
            self._inject_fault(method, url.path)
            return self._route(method, url.path, query, headers, body)
        except ApiError as e:
            return e.code, e.status()

    def log_of(
        self, method: str, raw_path: str, headers: dict[str, str]
    ) -> tuple[int, Obj] | Iterator[bytes] | None:
        """A pods/log request: an error to answer, or the log's bytes; None if not one."""
        if "/log" not in raw_path:
            return None
        try:
            self._authorize(headers)
        except ApiError as e:
            return e.code, e.status()
        url = urlsplit(raw_path)
        self.requests.append(Recorded(method, url.path, parse_qs(url.query), headers, None))

        def pod_of(ns: str, name: str) -> Obj | None:
            with self.store.lock:
                obj = self.store.objects.get(self.store.key(self.resource("v1", "pods"), ns, name))
                return copy.deepcopy(obj) if obj is not None else None

        return self.logs.request(method, raw_path, pod_of)

    def watch_of(
        self, method: str, raw_path: str, headers: dict[str, str]
    ) -> tuple[int, Obj] | Iterator[Any] | None:
        """A watch request: an error to answer, or the stream of events; None if not a watch."""
        url = urlsplit(raw_path)
        query = parse_qs(url.query)
        if method != "GET" or query.get("watch", ["false"])[0] not in ("true", "1"):
            return None
        self.requests.append(Recorded(method, url.path, query, headers, None))
        # A stream accepted before close_watches() ends with the others, even if its
        # generator first runs after it (it did not: a test's cut then missed that stream).
        epoch = self._watch_epoch
        try:
            self._authorize(headers)
            self._inject_fault(method, url.path)
            m = _PATH.match(url.path)
            gv = ("v1" if m["core"] else f"{m['group']}/{m['version']}") if m else ""
            res = _BY_PATH.get((gv, m["plural"] if m else ""))
            if m is None or res is None or m["name"] is not None or m["sub"] is not None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        except ApiError as e:
            return e.code, e.status()
        req = Request(method, res, m["ns"], None, query, "", None)
        return self._watch(req, epoch)

    def _watch(self, r: Request, epoch: int) -> Iterator[Any]:
        store = self.store
        labels, fields = r.arg("labelSelector"), r.arg("fieldSelector")
        bookmarks = r.arg("allowWatchBookmarks") in ("true", "1")
        timeout = float(r.arg("timeoutSeconds") or 1800)
        deadline = time.monotonic() + timeout

        def wanted(res: Resource, obj: Obj) -> bool:
            meta = obj["metadata"]
            return (
                res == r.res
                and (r.namespace is None or meta.get("namespace") == r.namespace)
                and (not labels or label_selector_matches(labels, meta.get("labels", {})))
                and (not fields or field_selector_matches(fields, obj))
            )

        rv_arg = r.arg("resourceVersion")
        with store.lock:
            if not rv_arg or rv_arg == "0":  # "now": the current state as ADDED, then changes
                since = store.current_rv
                backlog = [
                    {"type": "ADDED", "object": o}
                    for o in store.list(r.res, r.namespace, labels, fields)
                ]
            elif int(rv_arg) < store.compacted_rv:
                msg = f"too old resource version: {rv_arg} ({store.compacted_rv})"
                yield {"type": "ERROR", "object": ApiError(410, "Expired", msg).status()}
                return
            else:
                since, backlog = int(rv_arg), []
        yield from backlog
        last_sent = time.monotonic()
        while True:
            with store.lock:
                fresh = [(rv, t, res, o) for rv, t, res, o in store.changes if rv > since]
                if not fresh and not self.raw_events and epoch == self._watch_epoch:
                    store.changed.wait(min(self.bookmark_interval_s, 0.5))
                    fresh = [(rv, t, res, o) for rv, t, res, o in store.changes if rv > since]
                ended = epoch != self._watch_epoch or self._closing
                now_rv = store.current_rv
                raw = [line for res, line in self.raw_events if res == r.res]
                self.raw_events = [(res, x) for res, x in self.raw_events if res != r.res]
            yield from raw
            for rv, kind, res, obj in fresh:
                since = max(since, rv)
                if wanted(res, obj):
                    last_sent = time.monotonic()
                    yield {"type": kind, "object": copy.deepcopy(obj)}
            if ended or time.monotonic() >= deadline:
                return
            if bookmarks and time.monotonic() - last_sent >= self.bookmark_interval_s:
                last_sent = time.monotonic()
                since = max(since, now_rv)
                meta = {"resourceVersion": str(since)}
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": r.res.kind,
                        "apiVersion": r.res.group_version,
                        "metadata": meta,
                    },
                }

    def _authorize(self, headers: dict[str, str]) -> None:
        if self.token and headers.get("authorization") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _inject_fault(self, method: str, path: str) -> None:
        for f in self.faults:
            if f.times > 0 and f.method == method and re.search(f.path_pattern, path):
                if f.after > 0:
                    f.after -= 1
                    continue
                f.times -= 1
                raise ApiError(f.code, f.reason, f"stand-in fault: {HTTPStatus(f.code).phrase}")

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: Any,
    ) -> tuple[int, Obj]:
        m = _PATH.match(path)
        gv = None
        if m:
            gv = "v1" if m["core"] else f"{m['group']}/{m['version']}"
        res = _BY_PATH.get((gv or "", m["plural"] if m else ""))
        if m is None or res is None or (m["ns"] is not None and not res.namespaced):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if m["sub"] is not None:
            raise ApiError(405, "MethodNotAllowed", "not supported by the stand-in yet")
        scope = "item" if m["name"] else "collection"
        handler = _ROUTES.get((method, scope))
        if handler is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a {scope}")
        content_type = headers.get("content-type", "").split(";")[0].strip()
        req = Request(method, res, m["ns"], m["name"], query, content_type, body)
        return handler(self.store, req)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                logs = server.log_of(self.command, self.path, headers)
                if logs is not None and not isinstance(logs, tuple):
                    self._chunks(logs, "text/plain")
                    return
                watch = logs or server.watch_of(self.command, self.path, headers)
                if watch is not None and not isinstance(watch, tuple):
                    self._stream(watch)
                    return
                code, body = watch or server.handle(self.command, self.path, headers, raw)
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _chunks(self, parts: Iterator[bytes], content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.close_connection = True
                try:
                    for part in parts:
                        self.wfile.write(b"%X\r\n%s\r\n" % (len(part), part))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away

            def _stream(self, events: Iterator[Any]) -> None:
                """One JSON line per event, one chunk per line, as the API server sends."""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.close_connection = True
                try:
                    for event in events:
                        line = json.dumps(event).encode() + b"\n"
                        self.wfile.write(b"%X\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass  # requests are recorded on the server; keep test output clean

        return _Handler


# --- object builders --------------------------------------------------------------------


def pod(
    namespace: str,
    name: str,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
    node: str = "gpu-node-1",
    image: str = "registry.example.com/vllm:0.6.3",
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {"app": "vllm-inference"},
    }
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "vllm", "image": image}]},
        "status": {"phase": "Running"},
    }


def daemonset(
    namespace: str,
    name: str,
    prepull_image: str = "registry.example.com/vllm:0.6.2",
    init_name: str = "prepull",
    strategy: str = "RollingUpdate",
    desired: int = 4,
) -> Obj:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": strategy},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "initContainers": [
                        {"name": init_name, "image": prepull_image, "command": ["/bin/true"]}
                    ],
                    "containers": [{"name": "warm", "image": "registry.example.com/gpu-warm:1"}],
                },
            },
        },
        "status": {
            "currentNumberScheduled": desired,
            "desiredNumberScheduled": desired,
            "numberMisscheduled": 0,
            "numberReady": desired,
        },
    }


@fresh
def node(name: str, unschedulable: bool = False) -> Obj:
    spec: Obj = {"unschedulable": True} if unschedulable else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}


def seed(store: Store, objects: Iterable[Obj]) -> list[Obj]:
    return [store.create(o) for o in objects]


@fresh
def lease(namespace: str, name: str, **spec: Any) -> Obj:
    """A pre-created Lease, as deploy/base/lease.yaml ships it (no holder) unless `spec`
    says otherwise (holderIdentity, renewTime, leaseDurationSeconds, ...)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"leaseDurationSeconds": 15, **spec},
    }
