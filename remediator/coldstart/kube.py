"""The API calls `kubectl coldstart` makes, as the user: read-only, raw JSON, errors named.

Every call goes through the `kubernetes` client with `_preload_content=False`: the answer is
the urllib3 response, its bytes go to the core's decoder, no client model is built. The
kubeconfig is loaded as kubectl loads it ($KUBECONFIG, merged files, `--kubeconfig`,
`--context`, exec and token credentials), and the namespace defaults to the context's.

A refusal is said the way an SRE fixes it: a 403 names the verb, the resource and the
namespace the command needed ("forbidden: cannot list events in namespace llm (need: list
events)"), with the user the API server saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, cast

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

LIST_PAGE = 500
TIMEOUT = (5.0, 30.0)  # (connect, read) seconds of one call
_USER = re.compile(r'User "([^"]+)"')


class KubeError(Exception):
    """A call the command could not make; str() is the message for the user."""


class Forbidden(KubeError):
    """RBAC refused one call: what was needed, in `kubectl auth can-i` words."""

    def __init__(self, verb: str, resource: str, namespace: str, user: str | None) -> None:
        self.verb, self.resource, self.namespace, self.user = verb, resource, namespace, user
        who = f" ({user})" if user else ""
        super().__init__(
            f"forbidden{who}: cannot {verb} {resource} in namespace {namespace} "
            f"(need: {verb} {resource})"
        )


class NotFound(KubeError):
    pass


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list: the raw items and the API server's time of the answer."""

    items: list[Any]
    version: str
    at: float | None
    more: str | None  # the continue token


@dataclass(frozen=True, slots=True)
class Resource:
    """A collection the command lists: its name in RBAC terms and the client's list call."""

    rbac: str  # "pods", "events", "events.events.k8s.io"
    kind: str  # the kind its items are (for the core's decoder)
    call: Callable[..., Any]


def load(kubeconfig: str | None, context: str | None) -> tuple[client.ApiClient, str]:
    """The user's client and default namespace, as kubectl would pick them."""
    cfg = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, context=context, client_configuration=cfg
        )
        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError) as exc:
        where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
        raise KubeError(f"cannot load a kubeconfig from {where}: {exc}") from None
    name = context or (current or {}).get("name")
    chosen = next((c for c in contexts or () if c.get("name") == name), None) or {}
    namespace = (chosen.get("context") or {}).get("namespace") or "default"
    cfg.retries = 1  # one-shot: say the cluster is unreachable, do not retry for a minute
    return client.ApiClient(cfg), str(namespace)


class Kube:
    """The read-only calls, each raising KubeError (Forbidden, NotFound) with a message."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.server = str(api.configuration.host)
        core, events = client.CoreV1Api(api), client.EventsV1Api(api)
        self.core = core
        self.apps = client.AppsV1Api(api)
        self.pods = Resource("pods", "Pod", core.list_namespaced_pod)
        self.events = Resource("events", "Event", core.list_namespaced_event)
        self.events_v1 = Resource("events.events.k8s.io", "Event", events.list_namespaced_event)

    def page(
        self, what: Resource, namespace: str, *, more: str | None = None, **selectors: str | None
    ) -> Page:
        kw: dict[str, Any] = {k: v for k, v in selectors.items() if v}
        if more:
            kw["_continue"] = more
        resp = self._call("list", what.rbac, namespace, what.call, namespace, limit=LIST_PAGE, **kw)
        doc = orjson.loads(resp.data)
        meta = doc.get("metadata") or {}
        return Page(
            doc.get("items") or [],
            str(meta.get("resourceVersion") or ""),
            server_time(resp),
            meta.get("continue") or None,
        )

    def workload(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        """A Deployment or StatefulSet, raw."""
        call: Callable[..., Any] = self.apps.read_namespaced_deployment
        rbac = "deployments"
        if kind == "statefulset":
            call, rbac = self.apps.read_namespaced_stateful_set, "statefulsets"
        try:
            resp = self._call("get", rbac, namespace, call, name, namespace)
        except NotFound:
            raise NotFound(f'{kind} "{name}" not found in namespace {namespace}') from None
        return cast(dict[str, Any], orjson.loads(resp.data))

    def log(self, namespace: str, pod: str, container: str, limit_bytes: int) -> bytes:
        """The start of a container's log with the kubelet's timestamps (engine init is there)."""
        resp = self._call(
            "get",
            "pods/log",
            namespace,
            self.core.read_namespaced_pod_log,
            pod,
            namespace,
            container=container,
            timestamps=True,
            limit_bytes=limit_bytes,
        )
        return bytes(resp.data)

    def _call(
        self, verb: str, rbac: str, namespace: str, call: Callable[..., Any], *args: Any, **kw: Any
    ) -> urllib3.HTTPResponse:
        try:
            return cast(
                urllib3.HTTPResponse,
                call(*args, _preload_content=False, _request_timeout=TIMEOUT, **kw),
            )
        except ApiException as exc:
            raise self._refusal(exc, verb, rbac, namespace) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"cannot reach the API server at {self.server}: {exc}") from None

    def _refusal(self, exc: ApiException, verb: str, rbac: str, namespace: str) -> KubeError:
        body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else exc.body
        message = _status_message(body) or str(exc.reason or "")
        if exc.status == 403:
            found = _USER.search(message)
            return Forbidden(verb, rbac, namespace, found.group(1) if found else None)
        if exc.status == 404:
            return NotFound(message or f"{rbac} not found in namespace {namespace}")
        if exc.status == 401:
            return KubeError(
                f"unauthorized: the API server at {self.server} refused the kubeconfig's "
                "credentials (an expired token?)"
            )
        if exc.status == 0:
            return KubeError(f"cannot reach the API server at {self.server}: {message}")
        return KubeError(f"{verb} {rbac} in namespace {namespace}: {exc.status} {message}")


def _status_message(body: str | None) -> str:
    if not body:
        return ""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.strip()[:300]
    return str(doc.get("message") or "") if isinstance(doc, dict) else ""


def server_time(resp: urllib3.HTTPResponse) -> float | None:
    """The API server's clock, from the answer's Date header (whole seconds)."""
    date = resp.headers.get("Date")
    if not date:
        return None
    try:
        return parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
