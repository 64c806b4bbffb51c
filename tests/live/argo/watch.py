"""Every phase a Workflow passes through, from a real watch on the API server."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config, watch  # type: ignore[import-untyped]

from tests.live.harness import LiveCluster


@dataclass
class PhaseWatch:
    live: LiveCluster
    namespace: str = "argo"
    phases: dict[str, list[str]] = field(default_factory=dict)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PhaseWatch:
        api = client.CustomObjectsApi(config.new_client_from_config(str(self.live.kubeconfig)))
        self._thread = threading.Thread(target=self._loop, args=(api,), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _loop(self, api: client.CustomObjectsApi) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            for event in w.stream(
                api.list_namespaced_custom_object,
                "argoproj.io",
                "v1alpha1",
                self.namespace,
                "workflows",
                timeout_seconds=2,
            ):
                obj = event["object"]
                name = obj["metadata"]["name"]
                self.objects[name] = obj
                phase = obj.get("status", {}).get("phase") or ""
                seen = self.phases.setdefault(name, [])
                if not seen or seen[-1] != phase:
                    seen.append(phase)
                if self._stop.is_set():
                    w.stop()
