"""A `kubernetes` ApiClient: in-cluster when running in a pod, else a kubeconfig; and the
API server's clock as an answer states it (serve's watches and `kubectl coldstart` alike)."""

from __future__ import annotations

import os
from email.utils import parsedate_to_datetime

import urllib3
from kubernetes import client, config


def api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An explicit kubeconfig wins; in a pod (KUBERNETES_SERVICE_HOST set) the mounted
    ServiceAccount is used; otherwise $KUBECONFIG or ~/.kube/config."""
    cfg = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    return client.ApiClient(cfg)


def server_time(resp: urllib3.HTTPResponse) -> float | None:
    """The API server's clock, from the answer's Date header (whole seconds); None when the
    header is missing or unreadable."""
    date = resp.headers.get("Date")
    if not date:
        return None
    try:
        return parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError):
        return None
