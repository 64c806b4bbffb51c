"""A `kubernetes` ApiClient: in-cluster when running in a pod, else a kubeconfig."""

from __future__ import annotations

import os

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
