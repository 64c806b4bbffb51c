"""Hedge a stalled pod: surge its Deployment by one, let the first Ready of the two serve.

The surge and what it is for are written in one patch (optimistic: the resourceVersion read is
a precondition), as an entry of the Deployment's annotation `remediator.io/hedge`: the stalled
pod, the replica count to return to, the pods that existed before (any other pod of the
Deployment is new: the hedge pod, or a replacement, which races the same way) and the
deadline. So a rerun (the step's pod killed, Argo's retry) finds the hedge and carries on; it
never surges twice.

Several stalled pods of one Deployment are hedged at once, each by its own step, the count
surged by one for each. A new pod serves one hedge: the step names its racer in its entry
(`racing`), and the others leave that pod alone; a hedge started beside others counts their
new pods as new for it too (any may end up its racer); the new pod that took a stalled pod's
place is added to the running hedges' pods from before when that hedge ends. So k hedges end with
k pods, each stalled pod or the one new pod that beat it.

The end, whichever comes first:
- the stalled pod is Ready: the oldest not-Ready new pod of its hedge (its racer) is deleted;
- a new pod is Ready: the stalled pod is deleted (UID precondition);
- the stalled pod is gone (its own deletion once hung, an eviction): nothing is deleted, its
  racer is its replacement;
- the deadline passes: nothing is deleted (the core goes on judging the stalled pod).
Then the Deployment returns to its count by one in one patch that also drops the hedge's entry
and adds its pod to `remediator.io/hedged`: a rerun after that finds the hedge done. Deleting
before returning means the ReplicaSet may start a pod for the deleted one's place for a moment;
the return removes it (the ReplicaSet removes its newest, least started pod first), never a
Ready one. A count someone else changed while hedges run is left as they set it: no hedge
running returns anything then, and no new one starts until they have all ended.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from remediator.inputs.hedge_annotation import (
    HEDGE,
    HEDGED,
    Hedge,
    read_hedged,
    read_hedges,
    write_hedged,
    write_hedges,
)
from remediator.steps.errors import StepError
from remediator.steps.kube import API_ERRORS, REQUEST_TIMEOUT, api_failure
from remediator.steps.report import ExitCode

_WRITES = 5  # optimistic writes retried on a 409 (someone else wrote the Deployment)
_OBSERVED_S = 15.0  # how long the Deployment controller may take to observe a change

Outcome = Literal[
    "hedged_stalled_won",
    "hedged_hedge_won",
    "hedged_stalled_gone",
    "timeout",
    "would_hedge",
    "already_hedged",
    "already_gone",
    "replaced",
    "spared",
    "given_up",
    "nothing_to_end",
]


@dataclass(frozen=True, slots=True)
class Hedged:
    outcome: Outcome
    action_taken: bool
    detail: str
    winner: str | None = None
    deleted: str | None = None
    replicas: int | None = None


@dataclass(frozen=True, slots=True)
class Apis:
    apps: client.AppsV1Api
    core: client.CoreV1Api


@dataclass(frozen=True, slots=True)
class Clock:
    now: Callable[[], float]  # wall time: the deadline is written for a rerun in another pod
    sleep: Callable[[float], None]
    poll_s: float = 2.0


# ---- reading ---------------------------------------------------------------------------------
def _read_deployment(apps: client.AppsV1Api, namespace: str, name: str) -> Any:
    try:
        return apps.read_namespaced_deployment(name, namespace, _request_timeout=REQUEST_TIMEOUT)
    except ApiException as e:
        if e.status == 404:
            detail = f"deployment {namespace}/{name} not found"
            raise StepError(ExitCode.PRECONDITION, "not_found", detail) from e
        raise api_failure(e, f"read deployment {namespace}/{name}") from e
    except API_ERRORS as e:
        raise api_failure(e, f"read deployment {namespace}/{name}") from e


def _annotations(dep: Any) -> dict[str, str]:
    return dict(dep.metadata.annotations or {})


def _selector(dep: Any, where: str) -> str:
    sel = dep.spec.selector
    if sel is None or not sel.match_labels or sel.match_expressions:
        detail = f"deployment {where} selects its pods by expressions: not hedged"
        raise StepError(ExitCode.PRECONDITION, "unsupported_selector", detail)
    return ",".join(f"{k}={v}" for k, v in sorted(sel.match_labels.items()))


def _pods(core: client.CoreV1Api, namespace: str, dep: Any, where: str) -> list[Any]:
    """The Deployment's pods that are not going: owned by one of its ReplicaSets."""
    name = dep.metadata.name
    try:
        found = core.list_namespaced_pod(
            namespace, label_selector=_selector(dep, where), _request_timeout=REQUEST_TIMEOUT
        )
    except API_ERRORS as e:
        raise api_failure(e, f"list pods of deployment {where}") from e
    return [p for p in found.items or [] if _owned(p, name) and not _going(p)]


def _going(pod: Any) -> bool:
    return pod.metadata is None or pod.metadata.deletion_timestamp is not None


def _owned(pod: Any, deployment: str) -> bool:
    labels = pod.metadata.labels or {}
    template = labels.get("pod-template-hash")
    for ref in pod.metadata.owner_references or []:
        if ref.kind == "ReplicaSet" and ref.controller and template:
            return bool(ref.name == f"{deployment}-{template}")
    return False


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _observed(apps: client.AppsV1Api, namespace: str, name: str, clock: Clock) -> Any:
    """The Deployment once its controller has observed its latest change (a write to its
    annotations is one: the controller copies them to its ReplicaSets), or as it is after
    `_OBSERVED_S`: a status that lags says nothing of a rollout."""
    deadline = clock.now() + _OBSERVED_S
    while True:
        dep = _read_deployment(apps, namespace, name)
        status = dep.status
        seen = status.observed_generation if status is not None else None
        if (seen or 0) >= (dep.metadata.generation or 0) or clock.now() >= deadline:
            return dep
        clock.sleep(min(clock.poll_s, 1.0))


def _rolling(dep: Any) -> str | None:
    """Why a surge now would go to the wrong pods, or None."""
    status = dep.status
    if dep.spec.paused:
        return "is paused"
    if status is None or (status.observed_generation or 0) < (dep.metadata.generation or 0):
        return "has a change its controller has not acted on yet"
    if (status.updated_replicas or 0) < (status.replicas or 0):
        return "is rolling out (pods of an older template remain)"
    return None


# ---- writing ---------------------------------------------------------------------------------
def _patch(apps: client.AppsV1Api, dep: Any, body: dict[str, Any], dry_run: bool) -> bool:
    """A merge patch that holds only if the Deployment is as read; False on a conflict."""
    meta = dep.metadata
    body = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion":
                                 meta.resource_version}}  # fmt: skip
    try:
        apps.patch_namespaced_deployment(
            meta.name,
            meta.namespace,
            body,
            dry_run="All" if dry_run else None,
            _content_type="application/merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT,
        )
    except ApiException as e:
        if e.status == 409:
            return False
        raise api_failure(e, f"patch deployment {meta.namespace}/{meta.name}") from e
    except API_ERRORS as e:
        raise api_failure(e, f"patch deployment {meta.namespace}/{meta.name}") from e
    return True


def _delete_pod(core: client.CoreV1Api, namespace: str, name: str, uid: str) -> bool:
    """Delete that instance only; False when it was gone or another already."""
    body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid))
    try:
        core.delete_namespaced_pod(
            name, namespace, body=body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as e:
        if e.status in (404, 409):
            return False
        raise api_failure(e, f"delete pod {namespace}/{name}") from e
    except API_ERRORS as e:
        raise api_failure(e, f"delete pod {namespace}/{name}") from e
    return True


# ---- the hedge ---------------------------------------------------------------------------------
def hedge(
    apis: Apis,
    namespace: str,
    deployment: str,
    pod: str,
    uid: str,
    timeout_s: float,
    clock: Clock,
    dry_run: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> Hedged:
    """Start the hedge (or find the one a former run started) and see it to its end."""
    where = f"{namespace}/{deployment}"
    for _ in range(_WRITES):
        dep = _observed(apis.apps, namespace, deployment, clock)
        notes = _annotations(dep)
        plans = _plans(notes, where)
        if any(p.uid == uid for p in plans):
            return _see_through(apis, namespace, deployment, uid, clock, on_wait)
        orphans = [p for p in plans if clock.now() >= p.deadline]
        if orphans:  # (their workflows and exit handlers gone: ended here, nothing deleted)
            for orphan in orphans:
                _end(apis.apps, namespace, deployment, orphan, "orphaned: past its deadline")
            continue
        if uid in read_hedged(notes.get(HEDGED)):
            return Hedged("already_hedged", False, f"{pod} was hedged already ({where})")
        started = _start(apis, dep, where, pod, uid, plans, timeout_s, clock, dry_run)
        if isinstance(started, Hedged):
            return started
        if started:
            return _see_through(apis, namespace, deployment, uid, clock, on_wait)
    raise StepError(ExitCode.ERROR, "conflict", f"deployment {where} kept changing as we wrote")


def _plans(notes: dict[str, str], where: str) -> tuple[Hedge, ...]:
    """The hedges running, as the annotation says; refused as a precondition where the step
    did not write it."""
    text = notes.get(HEDGE)
    if text is None:
        return ()
    try:
        return read_hedges(text)
    except ValueError as e:
        raise StepError(ExitCode.PRECONDITION, "bad_annotation", f"{where}: {e}") from e


def _start(
    apis: Apis,
    dep: Any,
    where: str,
    pod: str,
    uid: str,
    plans: tuple[Hedge, ...],
    timeout_s: float,
    clock: Clock,
    dry_run: bool,
) -> Hedged | bool:
    """Surge by one, with what the hedge is for; False on a write conflict (read again)."""
    namespace = dep.metadata.namespace
    pods = _pods(apis.core, namespace, dep, where)
    stalled = next((p for p in pods if p.metadata.uid == uid), None)
    if stalled is None:
        same_name = next((p for p in pods if p.metadata.name == pod), None)
        if same_name is not None:
            detail = f"pod {namespace}/{pod} is another instance now: not hedged"
            return Hedged("replaced", False, detail)
        return Hedged("already_gone", False, f"pod {namespace}/{pod} ({uid}) is gone: not hedged")
    if _ready(stalled):
        return Hedged("spared", False, f"pod {namespace}/{pod} became Ready: not hedged")
    why = _rolling(dep)
    if why is not None:
        raise StepError(ExitCode.PRECONDITION, "rolling_out", f"deployment {where} {why}")
    replicas = int(dep.spec.replicas if dep.spec.replicas is not None else 1)
    base = plans[0].replicas if plans else replicas
    if replicas != base + len(plans):
        # Someone else set the count while hedges run: theirs stands, and the hedges running
        # return nothing at their end (`_end`); a surge now would be one nobody takes back.
        detail = (f"deployment {where} hedges {len(plans)} pod(s) and its count was changed "
                  f"meanwhile ({replicas}, not {base} + {len(plans)}): not hedged")  # fmt: skip
        raise StepError(ExitCode.PRECONDITION, "busy", detail)
    plan = Hedge(pod, uid, base, _from_before(pods, plans), clock.now() + timeout_s)
    body = {
        "metadata": {"annotations": {HEDGE: write_hedges((*plans, plan))}},
        "spec": {"replicas": replicas + 1},
    }
    if not _patch(apis.apps, dep, body, dry_run):
        return False
    if dry_run:
        detail = f"server-side dry run: deployment {where} would go {replicas} -> {replicas + 1}"
        return Hedged("would_hedge", False, detail, replicas=replicas + 1)
    return True


def _from_before(pods: list[Any], plans: tuple[Hedge, ...]) -> tuple[str, ...]:
    """The pods a new hedge counts as from before its surge: all there are, but those new
    for a hedge running (its hedge pod, a replacement), which race for this one too. Counted
    from before, the other's hedge pod would be no racer here, and if that hedge named this
    one's hedge pod its racer first, this one would have none."""

    def new_for(p: Hedge, pod: str) -> bool:
        return pod != p.uid and pod not in p.before

    uids = [p.metadata.uid for p in pods]
    return tuple(sorted(u for u in uids if not any(new_for(p, u) for p in plans)))


def _see_through(
    apis: Apis,
    namespace: str,
    deployment: str,
    uid: str,
    clock: Clock,
    on_wait: Callable[[str], None] | None,
) -> Hedged:
    """Wait for the first Ready of the two; delete the other; return to the count."""
    where = f"{namespace}/{deployment}"
    last = ""
    while True:
        dep = _read_deployment(apis.apps, namespace, deployment)
        plans = _plans(_annotations(dep), where)
        plan = next((p for p in plans if p.uid == uid), None)
        if plan is None:  # ended meanwhile (a former run, after its last look)
            return Hedged("already_hedged", False, f"the hedge of {uid} on {where} has ended")
        pods = _pods(apis.core, namespace, dep, where)
        fresh = _new(plan, plans, pods)
        found = _judge(apis.core, namespace, plan, fresh, pods)
        if found is not None:
            outcome, detail, winner, deleted = found
            heir = winner[1] if winner is not None and winner[1] != plan.uid else None
            count = _end(apis.apps, namespace, deployment, plan, detail, heir)
            name = winner[0] if winner is not None else None
            return Hedged(outcome, True, detail, name, deleted, count)
        _say_racing(apis.apps, dep, plans, plan, fresh)
        if clock.now() >= plan.deadline:
            detail = f"neither {plan.pod} nor a new pod was Ready by the deadline"
            count = _end(apis.apps, namespace, deployment, plan, detail)
            return Hedged("timeout", True, detail, None, None, count)
        names = ", ".join(p.metadata.name for p in fresh)
        waiting = f"waiting: {plan.pod} and {names or 'no new pod yet'}"
        if waiting != last and on_wait is not None:
            on_wait(waiting)
        last = waiting
        clock.sleep(max(0.0, min(clock.poll_s, plan.deadline - clock.now())))


def _new(plan: Hedge, plans: tuple[Hedge, ...], pods: list[Any]) -> list[Any]:
    """Pods started since the surge (oldest first) that race for this hedge: the hedge pod,
    or a replacement, which races the same way; never another hedge's stalled pod or racer.
    Each new pod serves one hedge: where two entries name one racer (their steps looked at
    once), the one written first keeps it, and the other's step picks again."""
    claimed: dict[str, str] = {}  # racer -> the hedge (stalled pod's uid) it serves
    for p in plans:
        if p.racing is not None:
            claimed.setdefault(p.racing, p.uid)
    taken = {*plan.before, *(p.uid for p in plans)}
    taken.update(pod for pod, owner in claimed.items() if owner != plan.uid)
    fresh = [p for p in pods if p.metadata.uid not in taken]
    return sorted(fresh, key=lambda p: (p.metadata.creation_timestamp, p.metadata.name))


def _racer(fresh: list[Any], racing: str | None) -> str | None:
    """The new pod racing the stalled one: the one named before while it still may (so two
    steps never trade racers look after look), else the oldest scheduled and not going."""
    able = [p.metadata.uid for p in fresh
            if p.spec.node_name and p.metadata.deletion_timestamp is None]  # fmt: skip
    return racing if racing in able else next(iter(able), None)


def _scheduled_at(pod: Any) -> float | None:
    """When the pod was scheduled: its PodScheduled condition's time (the API server's)."""
    conditions = (pod.status.conditions if pod.status else None) or []
    when = next((c.last_transition_time for c in conditions
                 if c.type == "PodScheduled" and c.status == "True"), None)  # fmt: skip
    return when.timestamp() if when is not None else None


def _say_racing(
    apps: client.AppsV1Api, dep: Any, plans: tuple[Hedge, ...], plan: Hedge, fresh: list[Any]
) -> None:
    """Keep the annotation's `racing` current, so the core leaves the stalled pod to the
    hedge while a new pod races it, and deletes it for its stall when none does (the hedge
    pod waits for GPUs the stalled pod holds); and so no other hedge takes that pod for its
    own. A conflict is left to the next look. With it, when it was scheduled: the hedge holds
    GPUs from then (guard.hedge_budget; the core sees the annotation a poll and a watch later)."""
    racing = _racer(fresh, plan.racing)
    if racing != plan.racing:
        pod = next((p for p in fresh if p.metadata.uid == racing), None)
        since = _scheduled_at(pod) if pod is not None else None
        said = tuple(replace(p, racing=racing, racing_since=since) if p.uid == plan.uid else p
                     for p in plans)  # fmt: skip
        body = {"metadata": {"annotations": {HEDGE: write_hedges(said)}}}
        _patch(apps, dep, body, dry_run=False)


Winner = tuple[str, str]  # (pod name, uid)


def _judge(
    core: client.CoreV1Api, namespace: str, plan: Hedge, fresh: list[Any], pods: list[Any]
) -> tuple[Outcome, str, Winner | None, str | None] | None:
    """The hedge's end if it has come: (outcome, what happened, winner, deleted)."""
    stalled = next((p for p in pods if p.metadata.uid == plan.uid), None)
    if stalled is None:
        heir = _pick(fresh, plan.racing)
        name = heir[0] if heir else None
        detail = f"{plan.pod} is gone (deleted or evicted); {name or 'no new pod'} takes its place"
        return "hedged_stalled_gone", detail, heir, None
    if _ready(stalled):
        # The hedge pod; Ready too at this look (a tie): still the one that goes, so the
        # ReplicaSet's own choice never falls on the stalled pod that just got there.
        losers = sorted(fresh, key=lambda p: p.metadata.uid != plan.racing)  # its racer first
        loser = next((p for p in losers if not _ready(p)), losers[0] if losers else None)
        deleted = None
        if loser is not None and _delete_pod(
            core, namespace, loser.metadata.name, loser.metadata.uid
        ):
            deleted = loser.metadata.name
        detail = f"{plan.pod} became Ready first; hedge pod {deleted or '(none left)'} deleted"
        return "hedged_stalled_won", detail, (plan.pod, plan.uid), deleted
    winner = next((p for p in fresh if _ready(p)), None)
    if winner is None:
        return None
    deleted = plan.pod if _delete_pod(core, namespace, plan.pod, plan.uid) else None
    detail = f"{winner.metadata.name} became Ready first; stalled pod {plan.pod} deleted"
    return "hedged_hedge_won", detail, (winner.metadata.name, winner.metadata.uid), deleted


def _pick(fresh: list[Any], racing: str | None) -> Winner | None:
    """The new pod that takes a gone stalled pod's place: its racer, else the oldest."""
    heir = next((p for p in fresh if p.metadata.uid == racing), fresh[0] if fresh else None)
    return (heir.metadata.name, heir.metadata.uid) if heir is not None else None


def _end(
    apps: client.AppsV1Api,
    namespace: str,
    deployment: str,
    plan: Hedge,
    why: str,
    heir: str | None = None,
) -> int | None:
    """Return to the count by one (unless someone else changed it), drop the hedge from the
    annotation, record the pod as hedged: one patch. The new pod that took the stalled pod's
    place (`heir`) is then one from before for the hedges still running: no other takes it.
    Returns the count left."""
    where = f"{namespace}/{deployment}"
    for _ in range(_WRITES):
        dep = _read_deployment(apps, namespace, deployment)
        notes = _annotations(dep)
        plans = _plans(notes, where)
        if all(p.uid != plan.uid for p in plans):
            return int(dep.spec.replicas) if dep.spec.replicas is not None else None
        rest = tuple(
            replace(p, before=tuple(sorted({*p.before, heir}))) if heir else p
            for p in plans
            if p.uid != plan.uid
        )
        now = int(dep.spec.replicas) if dep.spec.replicas is not None else None
        hedged = write_hedged(notes.get(HEDGED), plan.uid)
        body: dict[str, Any] = {"metadata": {"annotations": {HEDGE: write_hedges(rest),
                                                             HEDGED: hedged}}}  # fmt: skip
        count = now
        if now == plan.replicas + len(plans):
            body["spec"] = {"replicas": now - 1}
            count = now - 1
        if _patch(apps, dep, body, dry_run=False):
            return count
    raise StepError(ExitCode.ERROR, "conflict", f"deployment {where} kept changing ({why})")


def give_up(apps: client.AppsV1Api, namespace: str, deployment: str, uid: str) -> Hedged:
    """The workflow failed (its step out of retries): end the hedge of `uid` if it still runs,
    deleting nothing, so no surge outlives it."""
    where = f"{namespace}/{deployment}"
    plans = _plans(_annotations(_read_deployment(apps, namespace, deployment)), where)
    plan = next((p for p in plans if p.uid == uid), None)
    if plan is None:
        return Hedged("nothing_to_end", False, f"no hedge of {uid} runs on {where}")
    count = _end(apps, namespace, deployment, plan, "given up")
    detail = f"hedge of {plan.pod} given up; {where} at {count} replicas, nothing deleted"
    return Hedged("given_up", True, detail, None, None, count)
