"""Reach the API server: in-cluster, or through a kubeconfig; and read its refusals."""

from __future__ import annotations

import json
import os
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from remediator.steps.errors import StepError
from remediator.steps.report import ExitCode

# (connect, read) seconds for every call: a step must fail, not hang, on a sick API.
REQUEST_TIMEOUT = (5.0, 30.0)


def api_client(kubeconfig: str | None, context: str | None) -> client.ApiClient:
    """An explicit --kubeconfig wins; else the pod's service account when running in
    a cluster (KUBERNETES_SERVICE_HOST set); else $KUBECONFIG or ~/.kube/config."""
    cfg = client.Configuration()
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig,
                context=context,
                client_configuration=cfg,
                persist_config=False,
            )
    except (ConfigException, OSError) as e:
        detail = f"cannot load Kubernetes config: {e}"
        raise StepError(ExitCode.ERROR, "no_kube_config", detail) from e
    return client.ApiClient(cfg)


def status_body(e: ApiException) -> dict[str, Any]:
    """The Status object the API server sent with a refusal, or {} if none."""
    try:
        body = json.loads(e.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def api_failure(e: Exception, doing: str) -> StepError:
    """An API refusal or transport fault we do not handle: exit 5 (retryable)."""
    if isinstance(e, ApiException):
        msg = status_body(e).get("message") or e.reason
        return StepError(ExitCode.ERROR, "api_error", f"{doing}: HTTP {e.status}: {msg}")
    return StepError(ExitCode.ERROR, "api_unreachable", f"{doing}: {e}")


# Transport faults the client lets through as-is (connection refused, timeouts).
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError, OSError)
API_ERRORS: tuple[type[Exception], ...] = (ApiException, *TRANSPORT_ERRORS)
