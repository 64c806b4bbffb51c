"""pods/log for the kube API stand-in: what the API server proxies from the kubelet.

No kubelet runs here, so the stand-in keeps each container's log itself: a test writes lines
(`write`), a client reads them as `GET .../pods/NAME/log` does on a real cluster: `container`
(required when the pod has several), `follow` (stream until the pod goes), `timestamps`
(an RFC 3339 nano prefix per line, as the kubelet writes it), `limitBytes` (stop there).
Errors are the API server's: 404 for a pod that is not there, 400 for a missing or unknown
container.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

_LOG_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods/(?P<name>[^/]+)/log$")
Obj = dict[str, Any]


def _status(code: int, reason: str, message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _stamp(at: float) -> str:
    dt = datetime.fromtimestamp(at, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond:06d}000Z"


class PodLogs:
    def __init__(self) -> None:
        self._lines: dict[tuple[str, str, str], list[tuple[float, str]]] = {}
        self._changed = threading.Condition()
        self.closing = False
        self.bytes_sent = 0

    def write(self, ns: str, pod: str, container: str, line: str, at: float | None = None) -> None:
        with self._changed:
            key = (ns, pod, container)
            self._lines.setdefault(key, []).append((time.time() if at is None else at, line))
            self._changed.notify_all()

    def wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def request(
        self, method: str, raw_path: str, pod_of: Any
    ) -> tuple[int, Obj] | Iterator[bytes] | None:
        """None when not a log request; else an error to answer or the bytes to stream.
        `pod_of(ns, name)` returns the pod object or None."""
        url = urlsplit(raw_path)
        m = _LOG_PATH.match(url.path)
        if method != "GET" or m is None:
            return None
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        ns, name = m["ns"], m["name"]
        pod = pod_of(ns, name)
        if pod is None:
            return 404, _status(404, "NotFound", f'pods "{name}" not found')
        names = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
        container = q.get("container")
        if container is None:
            if len(names) != 1:
                msg = (
                    f"a container name must be specified for pod {name}, "
                    f"choose one of: [{' '.join(names)}]"
                )
                return 400, _status(400, "BadRequest", msg)
            container = names[0]
        if container not in names:
            msg = f"container {container} is not valid for pod {name}"
            return 400, _status(400, "BadRequest", msg)
        follow = q.get("follow") in ("true", "1")
        stamps = q.get("timestamps") in ("true", "1")
        limit = int(q["limitBytes"]) if "limitBytes" in q else None
        uid = pod["metadata"]["uid"]
        return self._stream((ns, name, container), uid, follow, stamps, limit, pod_of)

    def _stream(
        self,
        key: tuple[str, str, str],
        uid: str,
        follow: bool,
        stamps: bool,
        limit: int | None,
        pod_of: Any,
    ) -> Iterator[bytes]:
        sent, index = 0, 0
        while True:
            with self._changed:
                lines = self._lines.get(key, [])
                if index >= len(lines) and follow and not self.closing:
                    self._changed.wait(0.2)
                    lines = self._lines.get(key, [])
                fresh, index = lines[index:], len(lines)
            for at, line in fresh:
                data = (f"{_stamp(at)} {line}\n" if stamps else f"{line}\n").encode()
                if limit is not None and sent + len(data) > limit:
                    data = data[: limit - sent]
                sent += len(data)
                self.bytes_sent += len(data)
                yield data
                if limit is not None and sent >= limit:
                    return
            pod = pod_of(*key[:2])
            if not follow or self.closing or pod is None or pod["metadata"]["uid"] != uid:
                return  # a followed log ends when its container's pod is gone
