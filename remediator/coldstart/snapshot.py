"""One look at the cluster: the target's pods, their Events from both Event APIs and, with
`--logs`, the engine containers' logs, listed once and fed as raw JSON to the core's `Tracker`,
on the clock `remediator replay`'s Session keeps (each input at its own time, never back), so a
pod's timeline is the one replay prints and serve answers `/timelines` with.

The three lists run at once (the first screen waits for the slowest, not for their sum).
Events are listed for every Pod of the namespace (or the one pod named) and only those of the
listed pods are fed: Events outlive their pods by an hour, and a deleted pod is not the user's
question.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from remediator.coldstart.kube import EVENTS, Forbidden, Kube, KubeError, Page, Resource
from remediator.coldstart.target import Target, selector_of
from remediator.inputs.decode import normalize
from remediator.inputs.records import Input, InputError, PodEvent, PodSeen, Relisted
from remediator.timeline.model import PodTimeline
from remediator.timeline.tracker import Tracker

LOG_BYTES = 1 << 20  # per pod, from the log's start: where engine init is (serve's default)
LOG_READERS = 8


@dataclass
class Snapshot:
    """The core fed with what the lists held; `uids` the pods asked about.

    `tracker` and `clock` are what `Session.feed` drives for replay, without the policy and
    guardrails behind them: `kubectl coldstart` shows timelines and decides nothing (and so
    does not import them: the first screen waits for every import)."""

    tracker: Tracker
    namespace: str
    target: Target
    uids: set[str] = field(default_factory=set)
    at: float | None = None  # the API server's time of the pod list
    notes: list[str] = field(default_factory=list)  # said once, on stderr
    refused: int = 0  # list items the decoder refused (malformed)
    events_api: str | None = None  # the Event API that could be listed (for --watch)
    logs_forbidden: bool = False
    clock: float = 0.0  # the newest input time: the tracker's `now`, as the Session's

    def timelines(self) -> list[PodTimeline]:
        """The listed pods' timelines (and any the watch added), oldest first."""
        found = [t for t in self.tracker if t.uid in self.uids and not t.deleted]
        found.sort(key=lambda t: (t.namespace, t.created or 0.0, t.name))
        return found

    def now(self) -> float:
        """The cluster's time: the pod list's Date, or a later input's own time."""
        return max(self.at or 0.0, self.clock)

    def feed(self, items: Iterable[Input]) -> None:
        """As `Session.feed` applies them: a relist reconciles at the current time, any other
        input at its own time (the clock never goes back)."""
        tracker = self.tracker
        for item in items:
            if isinstance(item, Relisted):
                tracker.relisted(item, self.clock)
                if item.at is not None and item.at > self.clock:
                    self.clock = item.at
                continue
            if item.at is not None and item.at > self.clock:
                self.clock = item.at
            tracker.apply(item, self.clock)


def selectors(kube: Kube, namespace: str, target: Target) -> dict[str, str | None]:
    """The pod list's selectors for the target (a workload's own, read from it)."""
    if target.kind == "pod":
        return {"field_selector": f"metadata.name={target.name}"}
    if target.kind is not None:
        assert target.name is not None
        return {"label_selector": selector_of(kube.workload(target.kind, target.name, namespace))}
    return {"label_selector": target.selector}


def event_selector(api: str, target: Target) -> str:
    """Events about Pods (the one pod, when a pod was named), in each API's field names."""
    subject = "regarding" if api == "events.k8s.io" else "involvedObject"
    sel = f"{subject}.kind=Pod"
    if target.kind == "pod":
        sel += f",{subject}.name={target.name}"
    return sel


def take(
    kube: Kube,
    namespace: str,
    target: Target,
    tracker: Tracker,
    pod_sel: dict[str, str | None],
    *,
    logs: bool = False,
    log_bytes: int = LOG_BYTES,
) -> Snapshot:
    """List once (the pods by `pod_sel`, from `selectors`), feed the core, read the engine
    logs if asked. Raises KubeError when the pods (or both Event APIs) cannot be listed; a
    missing `pods/log` is a note."""
    snap = Snapshot(tracker, namespace, target)
    with ThreadPoolExecutor(3) as pool:
        pods = pool.submit(_list_all, kube, kube.pods, namespace, pod_sel)
        core = pool.submit(
            _list_all, kube, kube.events, namespace, {"field_selector": event_selector("", target)}
        )
        v1 = pool.submit(
            _list_all,
            kube,
            kube.events_v1,
            namespace,
            {"field_selector": event_selector("events.k8s.io", target)},
        )
        pod_pages = pods.result()  # a refusal here is the command's end
        event_pages = _events(snap, core, v1)
    pod_items = _decode(snap, kube.pods.kind, pod_pages)
    snap.at = pod_pages[0].at if pod_pages else None
    for item in pod_items:
        if isinstance(item, PodSeen):
            snap.uids.add(item.uid)
    names = {(i.namespace, i.name) for i in pod_items if isinstance(i, PodSeen)}
    snap.feed(pod_items)
    snap.feed(i for i in event_pages if not isinstance(i, PodEvent) or _about(i, snap.uids, names))
    if logs:
        read_logs(kube, snap, log_bytes)
    return snap


def _list_all(
    kube: Kube, what: Resource, namespace: str, selectors: dict[str, str | None]
) -> list[Page]:
    pages = [kube.page(what, namespace, **selectors)]
    while pages[-1].more:
        pages.append(kube.page(what, namespace, more=pages[-1].more, **selectors))
    return pages


def _events(snap: Snapshot, core: Future[list[Page]], v1: Future[list[Page]]) -> list[Input]:
    """Both Event APIs' lists: the same stored Events in two shapes (the core reads either).
    An Event the first list held is not decoded again from the second (same metadata.uid);
    one the second alone holds (written between the lists) is. One list refused is a note;
    both, the end."""
    out: list[Input] = []
    refusals: list[Forbidden] = []
    held: set[str] = set()
    for name, future in (("events", core), ("events.k8s.io", v1)):
        try:
            pages = future.result()
        except Forbidden as exc:
            refusals.append(exc)
            continue
        snap.events_api = snap.events_api or name
        out.extend(_decode(snap, EVENTS.kind, _new(pages, held)))
    if len(refusals) == 2:
        raise refusals[0]
    for refused in refusals:
        snap.notes.append(f"{refused}; Events read from the other Event API")
    return out


def _new(pages: list[Page], held: set[str]) -> list[Page]:
    """The pages without the objects already `held` (by uid), adding theirs to it."""
    out = []
    for page in pages:
        fresh = []
        for item in page.items:
            uid = (item.get("metadata") or {}).get("uid") if isinstance(item, dict) else None
            if isinstance(uid, str) and uid:
                if uid in held:
                    continue
                held.add(uid)
            fresh.append(item)
        out.append(Page(fresh, page.version, page.at, page.more))
    return out


def _decode(snap: Snapshot, kind: str, pages: list[Page]) -> list[Input]:
    """Item by item, as serve's watch does: one malformed object spoils no other."""
    out: list[Input] = []
    list_kind = f"{kind}List"
    for page in pages:
        for item in page.items:
            try:
                out.extend(normalize({"kind": list_kind, "items": [item]}))
            except InputError:
                snap.refused += 1
    return out


def _about(ev: PodEvent, uids: set[str], names: set[tuple[str, str]]) -> bool:
    if ev.pod_uid:
        return ev.pod_uid in uids
    return (ev.namespace, ev.pod) in names  # an Event recorded without the pod's UID


def read_logs(kube: Kube, snap: Snapshot, limit_bytes: int) -> None:
    """The engine container's log of each listed pod whose engine has started, from its
    start (limitBytes), timestamps on: vLLM's step lines become EngineStep inputs, exactly as
    serve's follower makes them. A refusal (no `pods/log`) is said once; the rest is shown."""
    wanted = [
        (t, t.endpoint.container)
        for t in snap.timelines()
        if t.started_first is not None and t.endpoint is not None and t.endpoint.container
    ]  # (the container is the engine's: the policy's, else the GPU one, else the first)
    if not wanted:
        return
    failed: list[str] = []
    t, container = wanted[0]  # one first: a refusal is said once, not once per pod
    try:
        snap.feed(_steps(kube.log(t.namespace, t.name, container, limit_bytes), t))
    except Forbidden as exc:
        snap.logs_forbidden = True
        snap.notes.append(f"{exc}: vLLM's engine-init steps are not shown; everything else is")
        return
    except KubeError as exc:
        failed.append(f"{t.name}: {exc}")
    with ThreadPoolExecutor(LOG_READERS) as pool:
        reads = [
            (t, pool.submit(kube.log, t.namespace, t.name, c, limit_bytes)) for t, c in wanted[1:]
        ]
        for t, future in reads:
            try:
                raw = future.result()
            except KubeError as exc:
                failed.append(f"{t.name}: {exc}")
                continue
            snap.feed(_steps(raw, t))
    if failed:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        snap.notes.append(f"logs not read: {failed[0]}{more}")


def _steps(raw: bytes, t: PodTimeline) -> list[Input]:
    """The lines that end a vLLM step, stamped with the kubelet's time (serve's `step_of`)."""
    from remediator.sources.engine_logs import step_of  # --logs only: it imports the metrics

    return [s for line in raw.splitlines() if (s := step_of(line, t.namespace, t.name, t.uid))]
