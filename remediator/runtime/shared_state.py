"""What serve remembers, shared between its replicas through a ConfigMap.

Each replica keeps, in its own state file, what the core learned (finished cold starts'
phases and vLLM steps) and what the guardrails remember (the rate limit's tokens, cooldowns,
blast-radius windows, idempotency and dedup). The Deployment's state file is an `emptyDir`:
an upgrade replaces both replicas, and both would start blind (adaptive budgets,
progress-aware detection and min_age's expected cold start wait for `min_samples` new cold
starts of each model), with every cap spent on nothing (a blast radius that allowed 20
deletions in the last ten minutes would allow 20 more), and with no kill-loop memory (the
replacement of a pod deleted for being slow, as slow, would be deleted in turn rather than
held as "budget too tight"). So the leader also writes all three to a ConfigMap
(pre-created, deploy/base/state.yaml; RBAC get/patch on it by name), every
`--state-share-interval` and once more when it stops, and a replica whose state file lacks
one takes it on start. The kill-loop memory is what got through, thinned to what a decider
remembers of it (`remembered`: the last pod deletion per workload and phase, the notices
told once, warmed work, a node's checks), its own and what it took.

What is shared is a help, never a reason not to start or to stop: a ConfigMap that cannot
be read or written is said (a warning, once per change) and left. A history row that does
not read back is left out, as the state file's are; a guard state that does not load is left
whole (the replica starts with its own, empty). Only an acting run's guard state is shared
(a dry run's "would" never happened). Written as one merge patch of the data keys: only the
leader writes, and the newest is the one to keep.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from remediator.contract.codec import decode as decode_record
from remediator.contract.codec import encode as encode_record
from remediator.contract.decision import Decision
from remediator.contract.records import GotThrough
from remediator.core.decider import Decider
from remediator.guard.state import GuardState, StateError
from remediator.logfields import get_logger

log = get_logger("remediator.shared_state")

KEY = "learned.json"
GUARD_KEY = "guard.json"
THROUGH_KEY = "through.json"
# What got through, at most: the newest first kept (ConfigMap bytes: a quarter of the room).
MAX_THROUGH = 2_000
# Under the API server's 1 MiB object limit, with room for the metadata: the guard state
# first, then the history; the oldest (model, phase) histories are left out first (a fleet of
# ~200 models at the default window fits whole).
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


def remembered(decisions: Iterable[Decision]) -> list[Decision]:
    """What a decider remembers of `decisions` let through (`Decider.remembers`), oldest
    first: the last pod deletion of each workload's phase, every other kind kept, once per
    (incident, action); at most the newest `MAX_THROUGH`."""
    kept: dict[object, Decision] = {}
    for d in sorted(decisions, key=lambda d: d.at):
        found = Decider.remembers(GotThrough(d, d.at, False, phase=d.phase))
        if found is False:
            continue
        key = (d.incident, d.action) if found is True else found
        kept.pop(key, None)
        kept[key] = d  # newest last
    return list(kept.values())[-MAX_THROUGH:]


def encode_through(decisions: list[Decision]) -> str:
    return encode_record(decisions).decode()


def decode_through(text: str) -> tuple[list[Decision], str | None]:
    """The decisions, or none and why (a list that does not read is left out whole)."""
    try:
        return decode_record(text, list[Decision]), None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return [], f"{THROUGH_KEY}: {exc}"


def _fitting(decisions: list[Decision], max_bytes: int) -> str | None:
    """What got through, as much of it as fits, the oldest left out first (None: none)."""
    while decisions:
        text = encode_through(decisions)
        if len(text.encode()) <= max_bytes:
            return text
        decisions = decisions[max(1, len(decisions) // 10) :]
    return None


@dataclass(frozen=True, slots=True)
class Shared:
    """What the ConfigMap holds: the learned history, an acting run's guard state
    (`GuardState.to_json`; None: none shared) and what got through (`remembered`)."""

    samples: list[Sample]
    guard: str | None = None
    through: tuple[Decision, ...] = ()


@dataclass(frozen=True, slots=True)
class StateConfigMap:
    """The ConfigMap `namespace/name`: `read` on start, `write` by the leader. Blocking
    (the kubernetes client): run it in a thread from the event loop."""

    api: client.ApiClient
    namespace: str
    name: str

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    def read(self) -> tuple[Shared, list[str]]:
        """What is shared; what could not be read (the ConfigMap itself, or rows)."""
        try:
            response: Any = client.CoreV1Api(self.api).read_namespaced_config_map(
                self.name,
                self.namespace,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
            doc = json.loads(response.data)
        except ApiException as exc:
            return Shared([]), [f"{self.where}: {exc.status} {exc.reason}"]
        except (HTTPError, OSError, ValueError) as exc:
            return Shared([]), [f"{self.where}: {exc}"]
        data = doc.get("data") if isinstance(doc, dict) else None
        data = data if isinstance(data, dict) else {}  # never written: a new cluster
        text, guard, through = data.get(KEY), data.get(GUARD_KEY), data.get(THROUGH_KEY)
        samples, bad = decode(text) if isinstance(text, str) and text else ([], [])
        decisions: list[Decision] = []
        if isinstance(through, str) and through:
            decisions, why = decode_through(through)
            bad += [why] if why is not None else []
        guard = guard if isinstance(guard, str) and guard else None
        return Shared(samples, guard, tuple(decisions)), bad

    def write(self, shared: Shared) -> tuple[str | None, int]:
        """Replace what is shared: None when written, else why not; and how many histories
        were left out to fit."""
        guard = shared.guard if shared.guard and len(shared.guard) < MAX_BYTES // 2 else None
        through = _fitting(list(shared.through), MAX_BYTES // 4)
        room = MAX_BYTES - len(guard or "") - len(through or "")
        text, left = encode(shared.samples, room)
        # None: the key goes (merge patch)
        body = {"data": {KEY: text, GUARD_KEY: guard, THROUGH_KEY: through}}
        try:
            client.CoreV1Api(self.api).patch_namespaced_config_map(
                self.name, self.namespace, body, _request_timeout=REQUEST_TIMEOUT_S
            )
        except ApiException as exc:
            return f"{self.where}: {exc.status} {exc.reason}", left
        except (HTTPError, OSError) as exc:
            return f"{self.where}: {exc}", left
        return None, left


class StateFile(Protocol):
    """The state file's history and guard state (`Outbox`)."""

    def learned(self) -> tuple[list[Sample], list[str]]: ...
    def learn(self, samples: Iterable[Sample], keep: int) -> None: ...
    def guard_state(self, acting: bool = False) -> str | None: ...
    def save_guard(self, guard: GuardState, acting: bool = True) -> None: ...
    def through(self) -> list[Decision]: ...
    def taken_through(self) -> str | None: ...
    def take_through(self, decisions: str) -> None: ...


class Leading(Protocol):
    def is_leader(self) -> bool: ...


class SharedState:
    """The state file's and the ConfigMap's: a replica that starts with no history (or no
    guard state) takes the ConfigMap's (`seed`); the leader writes its own there (`share`,
    every `every_s` while it runs, and once more when it stops)."""

    def __init__(
        self,
        store: StateConfigMap,
        state: StateFile,
        leader: Leading,
        every_s: float,
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.store, self.state, self.leader = store, state, leader
        self.every_s, self._sleep = every_s, sleep
        self._shared: Shared | None = None  # what was last written
        self._said: str | None = None  # the last failure said (each change once)

    def seed(self, keep: int, load_guard: Callable[[str], GuardState]) -> Shared:
        """What was taken from the ConfigMap into the state file: the history where it had
        none, the guard state (`load_guard` reads it as the session will) where it had none,
        what got through where it remembers none (no acting row of its own, none taken)."""
        mine, bad = self.state.learned()
        has_guard = self.state.guard_state() is not None
        has_through = bool(self.state.through()) or self.state.taken_through() is not None
        if (mine or bad) and has_guard and has_through:
            return Shared([])
        shared, unread = self.store.read()
        for why in unread:
            log.warning("shared state unreadable: left out", extra={"error": why})
        samples = [] if mine or bad else shared.samples
        if samples:
            self.state.learn(samples, keep)
        guard = None if has_guard else self._guard(shared.guard, load_guard)
        through = () if has_through else shared.through
        if through:
            self.state.take_through(encode_through(list(through)))
        if samples or guard or through:
            log.info(
                "state taken from the shared copy",
                extra={"where": self.store.where, "samples": len(samples), "guard": bool(guard),
                       "through": len(through)},
            )  # fmt: skip
        return Shared(samples, guard, through)

    def _guard(self, text: str | None, load: Callable[[str], GuardState]) -> str | None:
        if text is None:
            return None
        try:
            state = load(text)
        except (StateError, ValueError) as exc:
            log.warning("shared guard state unreadable: left out", extra={"error": str(exc)})
            return None
        self.state.save_guard(state, acting=True)  # only an acting run's is shared
        return text

    def _through(self) -> tuple[Decision, ...]:
        """What this replica remembers of what got through: what it took, and its own."""
        text = self.state.taken_through()
        taken, _ = decode_through(text) if text else ([], None)
        return tuple(remembered([*taken, *self.state.through()]))

    async def run(self) -> None:
        while True:
            await self._sleep(self.every_s)
            await self.share()

    async def share(self) -> bool:
        """Write what is shared if this replica leads and it changed; True when written."""
        if not self.leader.is_leader():
            return False
        samples, _ = self.state.learned()
        now = Shared(samples, self.state.guard_state(acting=True), self._through())
        if not (samples or now.guard or now.through) or now == self._shared:
            return False
        why, left = await asyncio.to_thread(self.store.write, now)
        if why is not None:
            if why != self._said:
                log.warning("state not shared", extra={"error": why})
            self._said = why
            return False
        if left:
            log.warning(
                "learned history shared in part: the oldest histories left out to fit",
                extra={"where": self.store.where, "left_out": left},
            )
        if self._said is not None:
            log.info("state shared again", extra={"where": self.store.where})
        self._shared, self._said = now, None
        return True
