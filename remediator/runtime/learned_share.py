"""What the core learned, shared between serve's replicas through a ConfigMap.

Each replica keeps its learned history (finished cold starts' phases and vLLM steps) in its
own state file, and the Deployment's state file is an `emptyDir`: an upgrade replaces both
replicas, and both would start blind (adaptive budgets, progress-aware detection and
min_age's expected cold start wait for `min_samples` new cold starts of each model). So the
leader also writes the history to a ConfigMap (pre-created, deploy/base/learned.yaml; RBAC
get/patch on it by name), every `--learned-share-interval` and when it stops, and a replica
whose state file has none reads it back on start.

A history is a help, never a reason not to start or to stop: a ConfigMap that cannot be read
or written is said (a warning, once per change) and left. A row that does not read back is
left out, as the state file's are. Written as one merge patch of its data key: only the
leader writes, and the newest history is the one to keep.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from remediator.logfields import get_logger

log = get_logger("remediator.learned_share")

KEY = "learned.json"
# Under the API server's 1 MiB object limit, with room for the metadata; the oldest
# (model, phase) histories are left out first (a fleet of ~200 models at the default window).
MAX_BYTES = 900 * 1024
REQUEST_TIMEOUT_S = 10.0

Sample = tuple[str, str, float]


def encode(samples: list[Sample], max_bytes: int = MAX_BYTES) -> tuple[str, int]:
    """The history as the ConfigMap holds it, and how many (model, phase) histories were
    left out to fit: {"learned": [[model, phase, [seconds, ...]], ...]}, least recently
    learned first, each history oldest first (as `Outbox.learned` gives them)."""
    rows: dict[tuple[str, str], list[float]] = {}
    for model, phase, seconds in samples:
        rows.setdefault((model, phase), []).append(seconds)
    kept = [[model, phase, values] for (model, phase), values in rows.items()]
    left = 0
    while True:
        text = json.dumps({"learned": kept}, separators=(",", ":"), allow_nan=False)
        if len(text.encode()) <= max_bytes or not kept:
            return text, left
        cut = max(1, len(kept) // 10)
        kept, left = kept[cut:], left + cut


def decode(text: str) -> tuple[list[Sample], list[str]]:
    """Samples, and what could not be read (a row, or the whole document)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return [], [f"{KEY}: not JSON: {exc}"]
    rows = doc.get("learned") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        return [], [f'{KEY}: expected {{"learned": [...]}}']
    out: list[Sample] = []
    bad: list[str] = []
    for i, row in enumerate(rows):
        why = _bad_row(row)
        if why is not None:
            bad.append(f"{KEY} row {i}: {why}")
            continue
        model, phase, values = row
        out.extend((model, phase, float(v)) for v in values)
    return out, bad


def _bad_row(row: Any) -> str | None:
    if not (isinstance(row, list) and len(row) == 3):
        return "expected [model, phase, [seconds, ...]]"
    model, phase, values = row
    if not (isinstance(model, str) and model and isinstance(phase, str) and phase):
        return "model and phase must be non-empty strings"
    if not isinstance(values, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < math.inf for v in values
    ):
        return "not a list of non-negative seconds"
    return None


@dataclass(frozen=True, slots=True)
class LearnedConfigMap:
    """The ConfigMap `namespace/name`: `read` on start, `write` by the leader. Blocking
    (the kubernetes client): run it in a thread from the event loop."""

    api: client.ApiClient
    namespace: str
    name: str

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def read(self) -> tuple[list[Sample], list[str]]:
        """The shared history; what could not be read (the ConfigMap itself, or rows)."""
        try:
            response: Any = client.CoreV1Api(self.api).read_namespaced_config_map(
                self.name,
                self.namespace,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
            doc = json.loads(response.data)
        except ApiException as exc:
            return [], [f"{self.where}: {exc.status} {exc.reason}"]
        except (HTTPError, OSError, ValueError) as exc:
            return [], [f"{self.where}: {exc}"]
        data = doc.get("data") if isinstance(doc, dict) else None
        text = data.get(KEY) if isinstance(data, dict) else None
        if not isinstance(text, str) or not text:
            return [], []  # never written: a new cluster, or no leader has learned yet
        return decode(text)

    def write(self, samples: list[Sample]) -> tuple[str | None, int]:
        """Replace the shared history with `samples`: None when written, else why not; and
        how many histories were left out to fit."""
        text, left = encode(samples)
        try:
            client.CoreV1Api(self.api).patch_namespaced_config_map(
                self.name,
                self.namespace,
                {"data": {KEY: text}},
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except ApiException as exc:
            return f"{self.where}: {exc.status} {exc.reason}", left
        except (HTTPError, OSError) as exc:
            return f"{self.where}: {exc}", left
        return None, left


class Learning(Protocol):
    """The state file's learned history (`Outbox`)."""

    def learned(self) -> tuple[list[Sample], list[str]]: ...
    def learn(self, samples: Iterable[Sample], keep: int) -> None: ...


class Leading(Protocol):
    def is_leader(self) -> bool: ...


class SharedHistory:
    """The state file's history and the ConfigMap's: a replica that starts with none takes
    the ConfigMap's (`seed`); the leader writes its own there (`share`, every `every_s`
    while it runs, and once more when it stops)."""

    def __init__(
        self,
        store: LearnedConfigMap,
        state: Learning,
        leader: Leading,
        every_s: float,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.store, self.state, self.leader = store, state, leader
        self.every_s, self._sleep = every_s, sleep
        self._shared: list[Sample] | None = None  # what was last written
        self._said: str | None = None  # the last failure said (each change once)

    def seed(self, keep: int) -> int:
        """Samples taken from the ConfigMap into the state file (0: it had its own)."""
        mine, bad = self.state.learned()
        if mine or bad:
            return 0
        samples, unread = self.store.read()
        for why in unread:
            log.warning("shared learned history unreadable: left out", extra={"error": why})
        if samples:
            self.state.learn(samples, keep)
            log.info(
                "learned history taken from the shared copy",
                extra={"where": self.store.where, "samples": len(samples)},
            )
        return len(samples)

    async def run(self) -> None:
        while True:
            await self._sleep(self.every_s)
            await self.share()

    async def share(self) -> bool:
        """Write the history if this replica leads and it changed; True when written."""
        if not self.leader.is_leader():
            return False
        samples, _ = self.state.learned()
        if not samples or samples == self._shared:
            return False
        why, left = await asyncio.to_thread(self.store.write, samples)
        if why is not None:
            if why != self._said:
                log.warning("learned history not shared", extra={"error": why})
            self._said = why
            return False
        if left:
            log.warning(
                "learned history shared in part: the oldest histories left out to fit",
                extra={"where": self.store.where, "left_out": left},
            )
        if self._said is not None:
            log.info("learned history shared again", extra={"where": self.store.where})
        self._shared, self._said = samples, None
        return True
