"""The API calls `kubectl coldstart` makes, as the user: read-only, raw JSON, errors named.

Every call goes through the `kubernetes` client's REST layer: the answer is the urllib3
response, its bytes go to the core's decoder, no client model is built (nor imported). The
kubeconfig is loaded as kubectl loads it ($KUBECONFIG, merged files, `--kubeconfig`,
`--context`, exec and token credentials), and the namespace defaults to the context's.

A refusal is said the way an SRE fixes it: a 403 names the verb, the resource and the
namespace the command needed ("forbidden: cannot list events in namespace llm (need: list
events)"), with the user the API server saw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from remediator.sources.kube_client import server_time

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
    """A collection the command lists: its name in RBAC terms and its REST path."""

    rbac: str  # "pods", "events", "events.events.k8s.io"
    kind: str  # the kind its items are (for the core's decoder)
    path: str  # with {namespace}


PODS = Resource("pods", "Pod", "/api/v1/namespaces/{namespace}/pods")
EVENTS = Resource("events", "Event", "/api/v1/namespaces/{namespace}/events")
EVENTS_V1 = Resource(
    "events.events.k8s.io", "Event", "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
)
_WORKLOADS = {"deployment": "deployments", "statefulset": "statefulsets"}


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
    """The read-only calls, each raising KubeError (Forbidden, NotFound) with a message.

    Through the client's REST layer (`ApiClient.param_serialize` and `call_api`: the user's
    credentials, TLS and token refresh as every generated call has them), not its generated
    API classes: importing `CoreV1Api` alone builds hundreds of pydantic-validated methods
    and cost more than the whole first screen."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.server = str(api.configuration.host)
        self.pods, self.events, self.events_v1 = PODS, EVENTS, EVENTS_V1

    def page(
        self, what: Resource, namespace: str, *, more: str | None = None, **selectors: str | None
    ) -> Page:
        query: list[tuple[str, str]] = [("limit", str(LIST_PAGE))]
        for key, value in selectors.items():
            if value:
                query.append((_CAMEL[key], value))
        if more:
            query.append(("continue", more))
        path = what.path.format(namespace=namespace)
        resp, data = self._get(path, query, "list", what.rbac, namespace)
        doc = orjson.loads(data)
        meta = doc.get("metadata") or {}
        return Page(
            doc.get("items") or [],
            str(meta.get("resourceVersion") or ""),
            server_time(resp),
            meta.get("continue") or None,
        )

    def workload(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        """A Deployment or StatefulSet, raw."""
        rbac = _WORKLOADS[kind]
        path = f"/apis/apps/v1/namespaces/{namespace}/{rbac}/{quote(name, safe='')}"
        try:
            _, data = self._get(path, [], "get", rbac, namespace)
        except NotFound:
            raise NotFound(f'{kind} "{name}" not found in namespace {namespace}') from None
        return cast(dict[str, Any], orjson.loads(data))

    def log(self, namespace: str, pod: str, container: str, limit_bytes: int) -> bytes:
        """The start of a container's log with the kubelet's timestamps (engine init is there)."""
        path = f"/api/v1/namespaces/{namespace}/pods/{quote(pod, safe='')}/log"
        query = [("container", container), ("timestamps", "true"), ("limitBytes", str(limit_bytes))]
        _, data = self._get(path, query, "get", "pods/log", namespace, accept="*/*")
        return data

    def _get(
        self,
        path: str,
        query: list[tuple[str, str]],
        verb: str,
        rbac: str,
        namespace: str,
        accept: str = "application/json",
    ) -> tuple[urllib3.HTTPResponse, bytes]:
        try:
            method, url, headers, _, _ = self.api.param_serialize(
                "GET",
                path,
                query_params=query,
                header_params={"Accept": accept},
                auth_settings=["BearerToken"],
            )
            resp = self.api.call_api(method, url, headers, _request_timeout=TIMEOUT)
            data = bytes(resp.read())  # type: ignore[no-untyped-call]
        except ApiException as exc:  # the REST layer's own (TLS, a retry-after) and status 0
            raise self._refusal(exc.status, exc.body or exc.reason, verb, rbac, namespace) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeError(f"cannot reach the API server at {self.server}: {exc}") from None
        if not 200 <= resp.status <= 299:
            raise self._refusal(resp.status, data, verb, rbac, namespace)
        return cast(urllib3.HTTPResponse, resp.response), data

    def _refusal(
        self, status: int, body: bytes | str | None, verb: str, rbac: str, namespace: str
    ) -> KubeError:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        message = _status_message(text)
        if status == 403:
            found = _USER.search(message)
            return Forbidden(verb, rbac, namespace, found.group(1) if found else None)
        if status == 404:
            return NotFound(message or f"{rbac} not found in namespace {namespace}")
        if status == 401:
            return KubeError(
                f"unauthorized: the API server at {self.server} refused the kubeconfig's "
                "credentials (an expired token?)"
            )
        if status == 0:
            return KubeError(f"cannot reach the API server at {self.server}: {message}")
        return KubeError(f"{verb} {rbac} in namespace {namespace}: {status} {message}")


_CAMEL = {"label_selector": "labelSelector", "field_selector": "fieldSelector"}


def _status_message(body: str | None) -> str:
    if not body:
        return ""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.strip()[:300]
    return str(doc.get("message") or "") if isinstance(doc, dict) else ""
