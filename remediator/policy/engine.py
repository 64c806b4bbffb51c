"""The policy engine: inputs + timelines + now → decisions. Pure; the caller owns the clock.

A pod in an unfinished phase gets a timer at `since + budget + (checks-1) × interval`;
`advance(now)` fires every timer due by `now`, at its own due time, so a stuck pod is
found when its budget lapses, not when its next event happens to arrive.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import count
from typing import Any, Final

from remediator.contract.actions import action
from remediator.contract.decision import Decision
from remediator.contract.records import GpuNews
from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.records import (
    AlertSeen,
    EngineSpan,
    EngineStep,
    GpuVerdict,
    Input,
    PodEvent,
    PodSeen,
    Relisted,
    WorkloadSeen,
)
from remediator.inputs.vllm_log import LOG_ENDED
from remediator.policy.alerts import alert_subject, node_of, pod_of
from remediator.policy.config import PolicyConfig
from remediator.policy.due import DueQueue
from remediator.policy.hedge import (
    RULE as HEDGE_RULE,
)
from remediator.policy.hedge import (
    cold_start_gpu_s,
    decide_hedge,
    left_to_hedge,
    racing_for,
    short_of_gpus,
)
from remediator.policy.hedge import (
    stalled as stalled_text,
)
from remediator.policy.history import PhaseHistory, budget, expected_cold_start, step_key
from remediator.policy.incident import incident_id
from remediator.policy.outcome import Ignored, Outcome
from remediator.policy.pace import NodePaces, first_wave_pace, ratio_of
from remediator.policy.stall import (
    Pace,
    Stall,
    learn_steps,
    own_pace,
    stall_of,
    stopped_behind,
    stretches_ended,
)
from remediator.policy.stuck import (
    Facts,
    decide_stuck,
    deletes,
    deletes_in,
    skew_note,
    too_tight,
)
from remediator.policy.workloads import (
    Workload,
    image_update,
    learn_ready,
    owner_workload,
    ready_created,
    update_incident,
    workload_key,
    workload_of,
)
from remediator.timeline.engine_steps import step_note
from remediator.timeline.model import UNFINISHED, PodTimeline
from remediator.timeline.tracker import StateChange, Tracker

_DONE: Final = ("ready", "serving")
# Kinds tested in one isinstance: a tuple (`A | B` builds a union object on each call).
_STEP_KINDS: Final = (EngineStep, EngineSpan)
_TOO_TIGHT: Final = "budget-too-tight"
_SELECTIONS: Final = 4096  # label sets whose selection is remembered (then forgotten, all at once)
# How long a pod over its engine-init budget whose log was never read waits for its log
# (`PolicyEngine.logs_wanted`) before it is judged without it: serve's follower looks once a
# second and reads a log's lines so far at once; a runtime that follows no log costs this.
READ_LOG_S: Final = 20.0
_WEIGHTS_KEY: Final = step_key("weights")


class PolicyEngine:
    def __init__(self, config: PolicyConfig, tracker: Tracker) -> None:
        self.config = config
        self.tracker = tracker
        self.history = PhaseHistory(config.stuck_pod.adaptive.window)
        self.workloads: dict[str, Workload] = {}
        self._timers: DueQueue[tuple[int, str, str, float]] = DueQueue()  # (seq, uid, state, since)
        self._seq = count()
        # Kill-loop guard, per (workload, phase): when a pod of it was last deleted for being
        # slow there (and which pod, and the vLLM stretches it had ended: empty where this
        # engine never saw it, as for another partition's deletion), and the pods held since
        # because their replacement was slow the same way.
        self._deleted: dict[tuple[str, str], tuple[float, str | None]] = {}
        self._deleted_stretches: dict[tuple[str, str], dict[str, float]] = {}
        self._holding: dict[tuple[str, str], set[str]] = {}
        self._deciding: dict[str, tuple[str, str]] = {}  # uid -> key of a delete in flight
        # (workload, phase, budget) on-call was told of, as its note's incident id
        self._told: set[str] = set()
        self._now_hint = 0.0  # the latest time the engine was told (re-armed holds start here)
        # uid → (state, seq) of the one live timer of a pod: older ones are stale, so two
        # timers never decide twice at one instant, whatever armed them.
        self._armed: dict[str, tuple[str, int]] = {}
        # Superseding work per workload (a warmup for its newest image): what the guard held
        # and when to ask again, and the incident last let through.
        self._held_work: dict[str, Decision] = {}
        self._work_timers: list[tuple[float, int, str]] = []
        # A node's check or cordon held by a guardrail, by incident: asked again when due.
        self._held_nodes: dict[str, Decision] = {}
        self._node_timers: list[tuple[float, int, str]] = []
        self._done_work: dict[str, str] = {}
        # Hedged starts (policy/hedge.py): the pods a hedge was decided for (one each, ever),
        # and what the guard has not yet been told (`take_gpu_news`): the GPU-seconds of
        # cold starts (what pays for hedges), when each workload last had a pod
        # unschedulable for GPUs, and the hedged pods whose stall ended (below).
        self._hedging = config.stuck_pod.hedge.enabled and config.stuck_pod.progress.enabled
        self._hedged: set[str] = set()
        self._left: set[str] = set()  # stalled pods left to their hedge, told so
        self._waiting: set[str] = set()  # racers stalled, waiting for their race's end, told so
        # Pods in engine init whose budget ran out while their log was never read (more in
        # engine init than `engine_logs.max_pods`): when their log was asked for
        # (`logs_wanted`), before anything is decided on the budget alone.
        self._reading: dict[str, float] = {}
        self._read_first = config.stuck_pod.progress.enabled and config.engine_logs.follow
        # Those whose stall has not ended yet, and those whose did since the guard was last
        # told, with when: the guard settles each hedge's charge by it (guard.hedge_budget).
        self._hedge_open: set[str] = set()
        self._hedge_ended: dict[str, tuple[float, bool]] = {}  # uid -> (when, replaced)
        # When a new pod was first seen racing each (the hedge step's annotation names it
        # once it has a node), and when it was scheduled as the annotation says: the hedge
        # holds GPUs from then, not from its decision.
        self._racing_since: dict[str, tuple[float, float | None]] = {}  # (when, scheduled)
        self._hedge_raced: dict[str, float] = {}  # of those ended, told with them
        self._racer_scheduled: dict[str, float] = {}  # and when that pod was, if said
        # New pods racing a stalled pod, this engine's (the annotation names them): their
        # stalled pod's uid, until they end; and those that ended unready since the guard
        # was last told, with when (a hedge whose stalled pod won held GPUs until then).
        self._racers: dict[str, str] = {}
        self._racer_gone: dict[str, float] = {}
        # Nodes a verification found with GPU memory unsettled: when, and the incident that
        # told of it; until one finds it settled. A pod stuck there is the node's
        # (Decision.unsettled_node), told in that incident's thread (Decision.told_under).
        self._unsettled: dict[str, tuple[float, str]] = {}
        self._fresh_short: dict[str, float] = {}
        self.fresh_gpu_s = 0.0
        # Whether the selector matches a label set, by the set's identity (the tracker holds
        # one dict per distinct set: a Deployment's pods share it); the set is kept with its
        # answer, so an identity is never reused while remembered.
        self._selections: dict[int, tuple[object, bool]] = {}

    # ---- inputs ---------------------------------------------------------------------
    def on_input(self, item: Input, change: StateChange | None, now: float) -> list[Outcome]:
        if now > self._now_hint:
            self._now_hint = now
        if self._hedging and (type(item) is PodSeen or type(item) is PodEvent):  # (final kinds)
            self._note_gpus(item, now)
        if change is not None:
            self._on_change(change.timeline, change.before, change.after)
        elif type(item) is PodSeen:
            # No state change, but the pod may have just become known (its Events came
            # first): every way into the tracker must arm the same timer.
            t = self.tracker.get(item.uid)
            state = t.counted if t is not None else None
            if t is not None and state in UNFINISHED:
                armed = self._armed.get(t.uid)
                if armed is None or armed[0] != state:
                    self._on_change(t, state, state)
            return []
        rules = _TAKES.get(type(item))  # the rules that take this kind of input (RULES)
        if rules is None:
            return []
        if len(rules) == 1:
            return rules[0](self, item, now)
        return [outcome for decide in rules for outcome in decide(self, item, now)]

    def relisted(self, item: Relisted, changes: list[StateChange], now: float) -> None:
        """A relist found these pods gone (their timers stand down, an in-flight delete is
        forgotten) and drops the workloads of its kind it no longer holds."""
        if now > self._now_hint:
            self._now_hint = now
        for change in changes:
            self._on_change(change.timeline, change.before, change.after)
        prefix = workload_key(item.namespace, item.kind, "")
        for key in [k for k in self.workloads if k.startswith(prefix)]:
            if item.covers(key[len(prefix) :]) and self.workloads[key].uid not in item.uids:
                del self.workloads[key]

    def forget(self, uid: str) -> None:
        """The tracker dropped this pod (known from webhooks alone, over its bound): what
        was armed for it stands down (its timer, if any, finds no timeline and passes)."""
        self._armed.pop(uid, None)
        self._deciding.pop(uid, None)
        self._hedged.discard(uid)
        self._left.discard(uid)
        self._waiting.discard(uid)
        self._reading.pop(uid, None)
        self._racers.pop(uid, None)  # (not told: its hedge keeps its slack)
        self._stall_ended(uid)
        for held in self._holding.values():
            held.discard(uid)
        if len(self._timers) > 2 * len(self._armed) + 1024:
            # Stale timers would wait in the heap till due: a flood of forgotten pods must
            # not grow it. A live timer is the one `_armed` names; keep only those.
            self._timers.keep(lambda x: self._armed.get(x[1]) == (x[2], x[0]))

    def next_deadline(self) -> float | None:
        due = self._timers.first()
        for heap in (self._work_timers, self._node_timers):
            if heap and (due is None or heap[0][0] < due):
                due = heap[0][0]
        return due

    def advance(self, now: float) -> list[tuple[float, Outcome]]:
        """Fire every timer due by `now`; each outcome comes with its own due time."""
        out: list[tuple[float, Outcome]] = []
        if self._work_timers and self._work_timers[0][0] <= now:
            out.extend(self._work_due(now))
        if self._node_timers and self._node_timers[0][0] <= now:
            out.extend(self._nodes_due(now))
        while (first := self._timers.first()) is not None and first <= now:
            due, (seq, uid, state, since) = self._timers.pop()
            t = self.tracker.get(uid)
            if t is None or t.state() != state or self._armed.get(uid) != (state, seq):
                continue  # the pod moved on since the timer was set, or a newer one stands
            current = t.since(state)
            if current != since:
                # Same phase, better evidence of when it began (an event came late): the
                # budget runs from when it really began, whichever order told us.
                if current is not None:
                    self._arm(self._deadline(t, state, current), t, state, current)
                continue
            interval = self.config.stuck_pod.check_interval_s
            allowed = self._deadline(t, state, since, unlearned=True, look_again=due + interval)
            if due < allowed:
                # The budget grew since this timer was armed (the model's history learnt it
                # is slower): the pod is judged against the budget it has now. A budget
                # that stands only for want of history (`budget`'s floor) is looked at
                # again each check: the siblings' first cold starts may bring it down.
                if self._deadline(t, state, since, unlearned=False) < allowed:
                    allowed = min(allowed, due + interval)
                self._arm(allowed, t, state, since)
                continue
            self._now_hint = due
            decision = self._timer_decision(t, state, since, due)
            if decision is not None:
                out.append((due, decision))
        return out

    def retry_later(
        self, decision: Decision, now: float, not_before: float, at_once: bool = False
    ) -> None:
        """A guardrail said "not yet" until `not_before`: look at the pod again then, and
        no sooner than a check interval (one "held" line per look, not one per tick).
        `at_once`: at `not_before` itself (the reason to hold is known to be over then, or
        the guardrail kept the decision a place then: the rate limit's queue)."""
        if decision.uid is None and decision.workload and action(decision.action).supersedes:
            self._hold_work(decision, now, not_before, at_once)
            return
        if decision.action == "hedge-pod":
            return  # one look per stall: the pod's own timer stands for when it is hung
        if decision.uid is None and action(decision.action).target == "node":
            self._hold_node(decision, now, not_before, at_once)
            return
        t = self.tracker.get(decision.uid) if decision.uid else None
        if t is None or t.state() not in UNFINISHED:
            return
        since = t.state_since()
        if since is None:
            return
        soonest = now if at_once else now + max(self.config.stuck_pod.check_interval_s, 30.0)
        due = max(soonest, not_before)
        self._arm(due, t, t.state(), since)

    def look_sooner(self, decision: Decision, now: float, not_before: float) -> None:
        """A pod held until it is as old as its model's expected cold start, whose estimate
        has since dropped: looked at again at `not_before`, no sooner than a check interval
        after `now`, where that is sooner than its timer (which may be a step's stall by
        now). Rare (a drop, with pods held): the timer is found in the heap."""
        t = self.tracker.get(decision.uid) if decision.uid else None
        armed = self._armed.get(t.uid) if t is not None else None
        if t is None or armed is None or armed[0] != t.state():
            return
        since = t.state_since()
        if since is None:
            return
        due = max(now + max(self.config.stuck_pod.check_interval_s, 30.0), not_before)
        uid, seq = t.uid, armed[1]
        if due < min((at for at, x in self._timers.items() if x[:2] == (seq, uid)), default=due):
            self._arm(due, t, armed[0], since)

    def deciding(self, uid: str | None) -> str | None:
        """The phase a deletion of this pod in flight was decided in (None: none is)."""
        key = self._deciding.get(uid) if uid else None
        return key[1] if key is not None else None

    @staticmethod
    def tells_once(decision: Decision) -> bool:
        """A notice told once per cause for good (a budget too tight), not once per window."""
        return decision.action == "notify" and decision.incident.startswith(_TOO_TIGHT)

    @staticmethod
    def remembers(decision: Decision, phase: str | None) -> tuple[str, str] | bool:
        """What `acted` keeps of a decision once no engine holds its pod (pruned, or
        another partition's): a pod deletion, only the kill-loop memory of its workload's
        phase, which the next deletion there overwrites (its key); nothing at all (False)
        without one. True: anything else, kept for good (a notice told once, warmed work,
        a node's check)."""
        if decision.action != "delete-pod":
            return True
        return (decision.workload, phase) if decision.workload and phase is not None else False

    def acted(self, decision: Decision, now: float, phase: str | None = None) -> None:
        """A decision got through the guardrails: remember the deletions a kill loop needs.
        `phase`: what the deciding engine said the deletion was for (`deciding`), so an
        engine that holds other pods of the workload (another partition) remembers it
        too; and a "budget too tight" note once told is told by nobody again."""
        key = self._deciding.pop(decision.uid or "", None)
        if key is None and phase is not None and decision.workload:
            key = (decision.workload, phase)
        if key is not None and decision.action == "delete-pod":
            # Dated by the decision's own time (a timer's: its deadline), not when it got
            # through: a serve started again decides an overdue pod late, and must count a
            # replacement made since as one that ran on did.
            self._deleted[key] = (min(now, decision.at), decision.uid)
            victim = self.tracker.get(decision.uid) if decision.uid else None
            self._deleted_stretches[key] = stretches_ended(victim) if victim is not None else {}
        if self.tells_once(decision):
            self._told.add(decision.incident)
        self._held_nodes.pop(decision.incident, None)  # (through: nothing left to ask)
        if decision.workload and action(decision.action).supersedes:
            self._done_work[decision.workload] = decision.incident
            held = self._held_work.get(decision.workload)
            if held is not None and held.at <= decision.at:  # superseded by what went
                del self._held_work[decision.workload]

    # ---- superseding work (issue 18, defect 12) ----------------------------------------
    def _hold_work(
        self, decision: Decision, now: float, not_before: float, at_once: bool = False
    ) -> None:
        """Held (a repeat within dedup's window, a cooldown): ask again then, for the
        newest held state of the workload; an older held one is superseded."""
        workload = decision.workload or ""
        held = self._held_work.get(workload)
        if held is not None and held.at > decision.at:
            return
        self._held_work[workload] = decision
        interval = max(self.config.stuck_pod.check_interval_s, 30.0)
        due = max(now if at_once else now + interval, not_before)
        heapq.heappush(self._work_timers, (due, next(self._seq), workload))

    def _work_due(self, now: float) -> list[tuple[float, Outcome]]:
        out: list[tuple[float, Outcome]] = []
        while self._work_timers and self._work_timers[0][0] <= now:
            due, _, workload = heapq.heappop(self._work_timers)
            held = self._held_work.pop(workload, None)
            known = self.workloads.get(workload)
            if held is None or known is None:
                continue  # let through or asked again meanwhile; or the workload is gone
            current = update_incident(known)
            if current == self._done_work.get(workload):
                continue  # its newest state is warmed already
            self._now_hint = max(self._now_hint, due)
            if current == held.incident:
                out.append(
                    (due, replace(held, at=due, reason=f"{held.reason} (held; asked again)"))
                )
            else:  # moved on to a state nothing decided for: on-call hears of it
                why = f"{held.reason}: held, and {workload} has changed since; not warmed"
                told = incident_id("held-work", held.incident)
                notify = Decision("notify", held.namespace, held.target, why, told, due)
                out.append((due, replace(notify, workload=workload)))
        return out

    def _hold_node(self, decision: Decision, now: float, not_before: float, at_once: bool) -> None:
        """A node's check or cordon held (the rate limit spent by a wave of deletions, a
        cooldown): asked again then, as a pod's deletion is. Never dropped: the alert that
        asked for it may not fire again for hours (Alertmanager's repeat_interval), and a
        node whose GPU memory never settles takes down every pod scheduled there meanwhile."""
        interval = max(self.config.stuck_pod.check_interval_s, 30.0)
        due = max(now if at_once else now + interval, not_before)
        self._held_nodes[decision.incident] = decision
        heapq.heappush(self._node_timers, (due, next(self._seq), decision.incident))

    def _nodes_due(self, now: float) -> list[tuple[float, Outcome]]:
        out: list[tuple[float, Outcome]] = []
        while self._node_timers and self._node_timers[0][0] <= now:
            due, _, incident = heapq.heappop(self._node_timers)
            held = self._held_nodes.pop(incident, None)
            if held is None:
                continue  # let through meanwhile, or asked again by a later hold
            self._now_hint = max(self._now_hint, due)
            out.append((due, replace(held, at=due, reason=f"{held.reason} (held; asked again)")))
        return out

    # ---- stuck pods -------------------------------------------------------------------
    def selected(self, t: PodTimeline) -> bool:
        """An inference pod this policy watches over (its selector and namespaces)."""
        return self._selected(t)

    def _selected(self, t: PodTimeline) -> bool:
        cfg = self.config.stuck_pod
        if not cfg.enabled or not t.pod_seen:
            return False
        if cfg.namespaces and t.namespace not in cfg.namespaces:
            return False
        labels = t.labels
        known = self._selections.get(id(labels))
        if known is not None and known[0] is labels:
            return known[1]
        selected = cfg.selector.matches(labels)
        if len(self._selections) >= _SELECTIONS:
            self._selections.clear()
        self._selections[id(labels)] = (labels, selected)
        return selected

    def _on_change(self, t: PodTimeline, before: str | None, after: str) -> None:
        if not self._selected(t):
            return
        if after in _DONE and not t.learned:
            t.learned = True
            self._learn(t)
        elif before in UNFINISHED and after not in UNFINISHED and self._hedging:
            self._pay(t)  # a cold start that ended unready held its GPUs all the same
        if (
            before is not None
            and deletes_in(before, self._init_deletes)
            and before != after
            and after != "deleted"
        ):
            self._phase_done(t, before)
        if after != "engine_init":
            self._reading.pop(t.uid, None)
        if after not in UNFINISHED:
            self._armed.pop(t.uid, None)
            self._stall_ended(t.uid, replaced=after in ("terminating", "deleted"))
            if t.uid in self._racers:
                self._racer_ended(t.uid, after)
            if after == "deleted":
                self._deciding.pop(t.uid, None)
                self._hedged.discard(t.uid)
                self._left.discard(t.uid)
                self._waiting.discard(t.uid)
            return
        armed = self._armed.get(t.uid)
        if armed is not None and armed[0] == after:
            return  # this phase's timer stands (it re-arms itself on better evidence)
        since = t.state_since()
        if since is not None:
            self._arm(self._deadline(t, after, since), t, after, since)

    @property
    def _init_deletes(self) -> bool:
        return self.config.stuck_pod.init_action == "delete-pod"

    def _deadline(
        self,
        t: PodTimeline,
        state: str,
        since: float,
        unlearned: bool = False,
        look_again: float | None = None,
    ) -> float:
        """When the pod is judged: its phase budget, or in engine init, where its log says
        which step it is in and siblings went through it, when that step has stalled (where
        none did, the later of its budget and its own pace: `own_pace`).
        Timers arm on the budget as learned (`unlearned` False: `budget`'s floor for a
        phase with no history left out); when one fires, the floor holds the pod on.
        `look_again`: where the pod's log is read and no sibling has timed its stretch yet
        (a model's first wave), no later than then: its siblings' times may come in
        meanwhile (learned here, or relayed from another decider), and judge it by its step."""
        cfg = self.config.stuck_pod
        stall = self._stall(t, state)
        if stall is not None:  # progressing: the phase budget does not apply
            if self._may_hedge(t, stall):  # a hedge starts at its share of the stall's limit
                return stall.hedge_due(cfg.hedge.at)
            return stall.due(cfg.checks, cfg.check_interval_s)
        seconds, _ = self._budget(t, state, unlearned)
        checks = (cfg.checks - 1) * cfg.check_interval_s
        due = since + seconds + checks
        if state == "engine_init":
            pace = self._pace(t, since)
            if pace is not None:
                # vLLM ended a step, and no sibling has timed the one it is in now: past the
                # budget, it is judged by its own pace (a start that keeps ending steps is
                # never deleted for being slow overall)
                due = max(since + seconds, pace.due(cfg.progress, seconds)) + checks
            if look_again is not None and look_again < due and self._log_read(t):
                return look_again
        return due

    def _budget(self, t: PodTimeline, phase: str, unlearned: bool = True) -> tuple[float, str]:
        """The pod's phase budget (`budget`); in engine init, from its first step line until
        it has ended a step, widened by its pace so far (`pace.first_wave_pace`): slow is not
        stuck."""
        cfg = self.config.stuck_pod
        seconds, how = budget(cfg, self.history, t.model, phase, unlearned)
        if phase != "engine_init" or not self._log_read(t):
            return seconds, how
        model = t.model or "unknown"
        pace, by = first_wave_pace(t, cfg.progress, self.history, model, self.node_paces,
                                   cfg.adaptive.min_siblings)  # fmt: skip
        if pace == 1.0:
            return seconds, how
        return seconds * pace, f"{how}; {pace:.2f}× {seconds:.0f}s for {by}"

    def _log_read(self, t: PodTimeline) -> bool:
        """Its engine's log is read (progress on, a line seen, the follow not ended)."""
        engine = t.engine
        if engine is None or not self.config.stuck_pod.progress.enabled:
            return False
        return engine.end(LOG_ENDED, t.started_at(), None) is None

    def _pace(self, t: PodTimeline, since: float) -> Pace | None:
        """The pod's own pace, where it ended a step since its engine init began: what both
        the deadline and the decision's reason go by."""
        pace = own_pace(t, self.config.stuck_pod.progress)
        return pace if pace is not None and pace.moved > since else None

    def _may_hedge(self, t: PodTimeline, stall: Stall) -> bool:
        return (
            self._hedging
            and stall.hedges
            and self.config.stuck_pod.checks > 1
            and t.uid not in self._hedged
        )

    def _hedge(self, t: PodTimeline, stall: Stall, since: float, now: float) -> Outcome:
        """The stall began: hedge (or say why not), and wait for the pod to be hung."""
        cfg = self.config.stuck_pod
        self._hedged.add(t.uid)
        self._hedge_open.add(t.uid)
        self._arm(stall.due(cfg.checks, cfg.check_interval_s), t, "engine_init", since)
        facts = self._facts(t)
        return decide_hedge(cfg.hedge, t, stall, facts, now)

    @property
    def has_gpu_news(self) -> bool:
        return bool(self.fresh_gpu_s or self._fresh_short or self._hedge_ended or self._racer_gone)

    def take_gpu_news(self) -> GpuNews:
        """What the guard weighs hedges by, seen since the last call (with hedging on): the
        GPU-seconds of cold starts, Ready or ended unready (what pays), the workloads short
        of GPUs, each until `gpu_short_s` after it was seen, and the hedged pods whose stall
        ended (guard.hedge_budget.hear)."""
        window = self.config.stuck_pod.hedge.gpu_short_s
        short = tuple((w, at, at + window) for w, at in self._fresh_short.items())
        ended = tuple((uid, at) for uid, (at, _) in self._hedge_ended.items())
        replaced = tuple(uid for uid, (_, by) in self._hedge_ended.items() if by)
        raced, gone = tuple(self._hedge_raced.items()), tuple(self._racer_gone.items())
        scheduled = tuple(self._racer_scheduled.items())
        news = GpuNews(self.fresh_gpu_s, short, ended, replaced, raced, gone, scheduled)
        self.fresh_gpu_s, self._fresh_short, self._hedge_ended = 0.0, {}, {}
        self._hedge_raced, self._racer_gone, self._racer_scheduled = {}, {}, {}
        return news

    def _stall_ended(self, uid: str, replaced: bool = False) -> None:
        """A hedged pod is Ready, deleted or gone: its hedge's charge can be settled. When
        is the latest time the engine was told, no earlier than the end (a relist's time
        for a pod deleted in a watch gap): the settlement never charges less than held.
        `replaced`: its deletion seen (terminating or gone), so the hedge pod is its
        replacement from then on, and nothing of the hedge is left to delete (forgotten by the
        tracker says nothing)."""
        raced = self._racing_since.pop(uid, None)
        if uid in self._hedge_open:
            self._hedge_open.discard(uid)
            self._hedge_ended[uid] = (self._now_hint, replaced)
            if raced is not None:
                self._hedge_raced[uid], scheduled = raced
                if scheduled is not None:
                    self._racer_scheduled[uid] = scheduled

    def _note_racing(self, seen: WorkloadSeen, now: float) -> None:
        """The hedges whose new pod is first seen racing their stalled pod (it has a node):
        from then its GPUs are held beside the stalled pod's, and the guard settles the
        hedge's charge from there (`GpuNews.raced`), or from when the annotation says it was
        scheduled, where it says (`GpuNews.racer_scheduled`: the same in every partition)."""
        for hedge in seen.hedges:
            uid, racer = hedge.uid, hedge.racing
            if racer is None:
                continue
            if uid in self._hedge_open:
                self._racing_since.setdefault(uid, (now, hedge.racing_since))
            if racer not in self._racers and self.tracker.get(racer) is not None:
                self._racers[racer] = uid  # (its own partition's, in Kafka: it may be another)

    def _races_ended(self, was: tuple[Hedge, ...], now_run: tuple[Hedge, ...], now: float) -> None:
        """Hedges the annotation no longer names: their racers waiting to be hedged
        (`_wait_to_hedge`) are looked at now, not at their next check."""
        running = {h.uid for h in now_run}
        for hedge in was:
            racer = hedge.racing
            if hedge.uid in running or racer is None or racer not in self._waiting:
                continue
            t = self.tracker.get(racer)
            since = t.since("engine_init") if t is not None else None
            if t is not None and since is not None and t.state() == "engine_init":
                self._arm(now, t, "engine_init", since)

    def _racer_ended(self, uid: str, after: str) -> None:
        """A racer's cold start ended: Ready (it won, or ties: nothing to tell), or gone
        unready (its GPUs free: told, `GpuNews.racer_gone`); terminating is not the end yet."""
        if after == "terminating":
            return
        stalled = self._racers.pop(uid)
        if after not in _DONE:
            self._racer_gone[stalled] = self._now_hint

    def _note_gpus(self, item: PodSeen | PodEvent, now: float) -> None:
        """Remember a workload's pod unschedulable for want of GPUs."""
        if not short_of_gpus(item):
            return
        if isinstance(item, PodSeen):
            workload = owner_workload(item.namespace, item.owner, item.labels)  # type: ignore[arg-type]
        else:
            t = self.tracker.current(item.namespace, item.pod)
            workload = owner_workload(t.namespace, t.owner, t.labels) if t else None
        if workload is not None:
            self._fresh_short[workload] = now

    @property
    def node_paces(self) -> NodePaces:
        """How the last cold starts on each node ran, in the history (which a Decider may
        have replaced since: read at each call)."""
        return NodePaces(self.history)

    def _stall(self, t: PodTimeline, state: str) -> Stall | None:
        if state != "engine_init":
            return None
        return stall_of(t, self.config.stuck_pod.progress, self.history, self.node_paces)

    def _on_step(self, item: EngineStep | EngineSpan) -> None:
        """A step line or span: the pod's engine moved on (or said where it is); judge it
        anew."""
        if not self.config.stuck_pod.progress.enabled:
            return
        t = self.tracker.timeline_of(item)
        if t is None or not self._selected(t) or t.state() != "engine_init":
            return
        self._learn_pace(t)
        since = t.since("engine_init")
        if since is not None:
            look_again = self._now_hint + self.config.stuck_pod.check_interval_s
            due = self._deadline(t, "engine_init", since, look_again=look_again)
            self._arm(due, t, "engine_init", since)

    def _learn_pace(self, t: PodTimeline) -> None:
        """Each step a pod's engine ends tells its node's pace so far (`NodePaces`), so a slow
        node is known from its first pods, before one is Ready there: in random fleets 628 and
        2448 (one node 2× slow) a pod whose weights had drawn fast, at its siblings' pace, was
        deleted mid-compile while the node's other pods, still starting, ran at twice theirs."""
        if t.node is None or t.engine is None:
            return
        started = t.started_at()
        ended = len(t.engine.judged(started))  # (the steps ended, as `ratio_of` reads them)
        if ended == 0 or ended == t.paced:
            return
        t.paced = ended
        model = t.model or "unknown"
        ratio = ratio_of(t, self.config.stuck_pod.progress, self.history, model, started)
        if ratio is not None:
            self.node_paces.learn(t.node, ratio)

    def _arm(self, due: float, t: PodTimeline, state: str, since: float) -> None:
        seq = next(self._seq)
        self._armed[t.uid] = (state, seq)
        self._timers.push(due, (seq, t.uid, state, since))

    def _learn(self, t: PodTimeline) -> None:
        model = t.model or "unknown"
        for phase, value in t.phases().items():
            if value is not None:
                self.history.add(model, phase, value)
        total = t.total()
        if total is not None:
            self.history.add(model, "total", total)
        if t.node is not None:  # how its node ran it, against the siblings before it
            ratio = ratio_of(t, self.config.stuck_pod.progress, self.history, model,
                             t.started_at())  # fmt: skip
            if ratio is not None:
                self.node_paces.learn(t.node, ratio)
        learn_steps(t, self.history)  # what each vLLM step took it
        learn_ready(t, self.history)  # its workload served by a pod created then
        if self._hedging:
            self._pay(t)

    def _pay(self, t: PodTimeline) -> None:
        """Tell the hedge budget the GPUs a cold start held, once: to Ready, or to now for
        one that ended before (the guard's pay, `take_gpu_news`): its deletion begun
        (terminating), which is before its GPUs are free; a pod deleted in a watch gap pays
        to the relist that found it gone, at most the gap more than it held."""
        if not t.paid:
            t.paid = True
            ready = t.learned and t.ready is not None
            self.fresh_gpu_s += cold_start_gpu_s(t, None if ready else self._now_hint)

    def _timer_decision(
        self, t: PodTimeline, phase: str, since: float, now: float
    ) -> Outcome | None:
        cfg = self.config.stuck_pod
        seconds, how = self._budget(t, phase)
        why = (
            f"{phase} for {now - since:.0f}s, over its {seconds:.0f}s budget ({how}) "
            f"for {cfg.checks} checks in a row"
        )
        sample = phase
        stall = self._stall(t, phase)
        if stall is not None and self._may_hedge(t, stall):
            racing = racing_for(t, self._hedges_of(t), now)
            if racing is None:
                return self._hedge(t, stall, since, now)
            if now < stall.due(cfg.checks, cfg.check_interval_s):
                return self._wait_to_hedge(t, stall, since, now, racing)
        if stall is not None and self.config.stuck_pod.hedge.leave_to_race:
            raced = self._raced(t, now)
            if raced is not None:
                return self._leave_to_hedge(t, stall, since, now, raced)
        if stall is not None:
            seconds, sample = stall.limit, step_key(stall.timed_as)
            why = stall.reason(cfg.progress, t.model or "unknown", cfg.checks, now)
        elif phase == "engine_init" and self._read_log_first(t, since, now):
            return self._reading_log(t, since, now)
        elif phase == "engine_init":
            why += step_note(t.engine, t.started_at(), now)
            pace = self._pace(t, since)
            if pace is not None:
                why += pace.note(cfg.progress, seconds, now)
        why += skew_note(t)
        facts = self._facts(t)
        key = (facts.workload or "", phase)
        if deletes(t, phase, self._init_deletes) and facts.workload:
            evidence = self._too_tight(t, key, seconds, sample, now)
            if evidence is not None:
                return self._hold(t, key, seconds, how, evidence, now)
            self._deciding[t.uid] = key
        stalled = stall.timed_as if stall is not None else None
        return decide_stuck(t, phase, why, facts, now, self._init_deletes, stalled)

    def _hedges_of(self, t: PodTimeline) -> tuple[Hedge, ...]:
        """The hedges its workload's annotation says run."""
        workload = owner_workload(t.namespace, t.owner, t.labels)
        known = self.workloads.get(workload) if workload else None
        return known.hedges if known else ()

    def _raced(self, t: PodTimeline, now: float) -> str | None:
        """Why the stalled pod is left to its hedge (`left_to_hedge`), or None."""
        return left_to_hedge(t, self._hedges_of(t), now)

    def _wait_to_hedge(
        self, t: PodTimeline, stall: Stall, since: float, now: float, racing: Hedge
    ) -> Outcome | None:
        """A racer stalled while the hedge it races runs (`racing_for`): looked at again each
        check, hedged once that hedge has ended, judged hung at its stall's end as any pod;
        said once (an Ignored: why no hedge yet)."""
        cfg = self.config.stuck_pod
        self._arm(min(stall.due(cfg.checks, cfg.check_interval_s), now + cfg.check_interval_s),
                  t, "engine_init", since)  # fmt: skip
        if t.uid in self._waiting:
            return None
        self._waiting.add(t.uid)
        said = stalled_text(stall, t.model or "unknown", now, cfg.hedge.at)
        why = (f"no hedge yet: it races the hedge of {racing.pod}; hedged once that one "
               "ends with it gone")  # fmt: skip
        return Ignored(HEDGE_RULE, f"{t.namespace}/{t.name}", f"{said}; {why}", now)

    def _leave_to_hedge(
        self, t: PodTimeline, stall: Stall, since: float, now: float, why: str
    ) -> Outcome | None:
        """Looked at again each check while its hedge races it; said once (an Ignored: why
        it is not deleted)."""
        cfg = self.config.stuck_pod
        self._arm(now + cfg.check_interval_s, t, "engine_init", since)
        if t.uid in self._left:
            return None
        self._left.add(t.uid)
        stalled = stall.reason(cfg.progress, t.model or "unknown", cfg.checks, now)
        return Ignored(HEDGE_RULE, f"{t.namespace}/{t.name}", f"{stalled}; not deleted: {why}", now)

    def logs_wanted(self) -> list[str]:
        """The pods whose log is asked for before they are judged (`_read_log_first`): the
        log follower reads these first, beyond its `max_pods`."""
        return list(self._reading)

    def _read_log_first(self, t: PodTimeline, since: float, now: float) -> bool:
        """Whether to read the pod's log before judging it by its phase budget: its log was
        never read (eight logs are followed at once, and a first wave has more pods in
        engine init) and has not been asked for longer than READ_LOG_S. Act on the truth:
        in random fleets 3043, 3728 and 8569 (untuned, a GPU node 2-3× slow) a first-wave
        pod there was deleted over a budget its siblings elsewhere set, its log unread; read,
        it showed steps ending (one had logged its API server started). Only where a
        sibling's log told its steps: a model whose pods log no vLLM step (another engine)
        or none read yet is judged as before."""
        if not self._read_first or t.engine is not None:
            return False
        if not self.history.count(t.model or "unknown", _WEIGHTS_KEY):
            return False
        asked = self._reading.setdefault(t.uid, now)
        return now < asked + READ_LOG_S

    def _reading_log(self, t: PodTimeline, since: float, now: float) -> Outcome | None:
        """Looked at again when its lines are in (a step line re-arms its timer) or the
        wait is over; said once."""
        asked = self._reading[t.uid]
        self._arm(asked + READ_LOG_S, t, "engine_init", since)
        if asked < now:
            return None
        why = "engine_init over its budget, its log never read: read first, then judged"
        return Ignored("stuck_pod", f"{t.namespace}/{t.name}", why, now)

    def _too_tight(
        self, t: PodTimeline, key: tuple[str, str], seconds: float, sample: str, now: float
    ) -> str | None:
        """Why the budget, not the pod, looks wrong; None when nothing says so.

        Most recent completions of the phase by the model's pods took longer than the budget
        (one healthy sibling is evidence enough); or, before any completed it, a pod created
        after we deleted one of its workload for being slow there is as slow (the
        replacement of a kill loop's first victim), unless its log shows it stopped where the
        deleted pod went on (`stall.stopped_behind`): stuck, not slow."""
        n, within = self.history.share_within(t.model or "unknown", sample, seconds)
        if n:
            if within < 0.5:
                return f"{1 - within:.0%} of the last {n} pods of this model took longer"
            return None
        deleted, victim = self._deleted.get(key, (None, None))
        # (The pod deleted itself is no evidence: judged again after a restart, or while
        # its deletion is still under way, it is that deletion's pod, not its replacement.)
        if (
            deleted is not None
            and t.uid != victim
            and t.created is not None
            and (t.created >= deleted - 1.0)
            and self._stopped_behind(t, key, now) is None
        ):
            return (
                f"a pod of it was deleted for exceeding it {t.created - deleted:.0f}s before "
                f"{t.name} was created, and {t.name} is as slow"
            )
        return None

    def _stopped_behind(self, t: PodTimeline, key: tuple[str, str], now: float) -> str | None:
        """`stall.stopped_behind`, beside the pod deleted before it: as its timeline is now
        where the tracker still has it (its lines may come in after its deletion), else as it
        was when deleted."""
        victim = self.tracker.get(self._deleted[key][1] or "")
        ended = stretches_ended(victim) if victim is not None else self._deleted_stretches[key]
        return stopped_behind(t, ended, self.config.stuck_pod.progress, now)

    def _hold(
        self,
        t: PodTimeline,
        key: tuple[str, str],
        seconds: float,
        how: str,
        evidence: str,
        now: float,
    ) -> Decision | None:
        """Hold deletions in the workload's phase until a pod of it gets through (which
        teaches the budget), and tell on-call once per budget: a kill loop, never."""
        self._holding.setdefault(key, set()).add(t.uid)
        told = incident_id(_TOO_TIGHT, *key, f"{seconds:.0f}")  # too_tight()'s incident
        if told in self._told:
            return None
        self._told.add(told)
        return too_tight(t, key[0], key[1], seconds, how, evidence, now)

    def _phase_done(self, t: PodTimeline, phase: str) -> None:
        """A pod of the workload got through `phase`: its budget is reachable; lift a hold."""
        if not self._holding:
            return  # nothing held anywhere (most of the time): no workload to work out
        workload = owner_workload(t.namespace, t.owner, t.labels)
        if workload is None:
            return
        key = (workload, phase)
        for uid in self._holding.pop(key, set()):
            held = self.tracker.get(uid)
            since = held.state_since() if held is not None else None
            if held is not None and since is not None and held.state() == phase:
                self._arm(max(self._now_hint, self._deadline(held, phase, since)), held,
                          phase, since)  # fmt: skip

    def _facts(self, t: PodTimeline) -> Facts:
        workload = owner_workload(t.namespace, t.owner, t.labels)
        known = self.workloads.get(workload) if workload else None
        cfg = self.config.stuck_pod
        unsettled = self._unsettled.get(t.node) if t.node is not None else None
        return Facts(
            workload=workload,
            replicas=known.replicas if known else None,
            rolling=known.rolling if known else None,
            expected_cold_start_s=expected_cold_start(cfg, self.history, t.model),
            unsettled_node=t.node if unsettled is not None else None,
            unsettled_incident=unsettled[1] if unsettled is not None else None,
            ready_created=ready_created(self.history, workload),
        )

    # ---- alerts -----------------------------------------------------------------------
    def _on_stuck(self, item: AlertSeen | EngineStep | EngineSpan, now: float) -> list[Outcome]:
        if isinstance(item, _STEP_KINDS):
            self._on_step(item)
            return []
        if item.alertname in self.config.alerts.stuck_pod:
            return [self._stuck_alert(item, now)]
        return []

    def _on_gpu(self, item: AlertSeen | GpuVerdict, now: float) -> list[Outcome]:
        if isinstance(item, GpuVerdict):
            return self._on_verdict(item, now)
        names = self.config.alerts
        if item.alertname in names.gpu_memory and item.alertname not in names.stuck_pod:
            return [self._gpu_alert(item, now)]
        return []

    def _stuck_alert(self, alert: AlertSeen, now: float) -> Outcome:
        subject = alert_subject(alert)
        if alert.status != "firing":
            return Ignored("stuck_pod", subject, "alert resolved: never acted on", now)
        where = pod_of(alert)
        if isinstance(where, str):
            return Ignored("stuck_pod", subject, where, now)
        t = self.tracker.current(*where)
        pod = "/".join(where)
        if t is None:
            return Ignored("stuck_pod", subject, f"pod {pod} is not tracked: not acted on", now)
        state = t.state()
        if state not in UNFINISHED:
            return Ignored("stuck_pod", subject, f"pod {pod} is {state}: nothing to do", now)
        if not self._selected(t):
            return Ignored("stuck_pod", subject, f"pod {pod} is not an inference pod", now)
        since = t.state_since()
        for_s = f" for {now - since:.0f}s" if since is not None else ""
        why = f"alert {alert.alertname} firing; pod in {state}{for_s}"
        if state == "engine_init":
            why += step_note(t.engine, t.started_at(), now)
        return decide_stuck(t, state, why, self._facts(t), now, self._init_deletes)

    # ---- GPU memory -------------------------------------------------------------------
    def _gpu_alert(self, alert: AlertSeen, now: float) -> Outcome:
        subject = alert_subject(alert)
        if alert.status != "firing":
            return Ignored("gpu_memory", subject, "alert resolved: never acted on", now)
        node = node_of(alert)
        if node is None:
            return Ignored("gpu_memory", subject, "no node label: ignored, never guessed", now)
        cfg = self.config.gpu_memory
        return Decision(
            action="verify-gpu-memory",
            namespace="",
            target=node,
            reason=f"alert {alert.alertname} firing on {node}; verifying with nvidia-smi",
            incident=incident_id("gpu-memory", node, alert.fingerprint, str(alert.starts_at)),
            at=now,
            params=(
                ("samples", str(cfg.samples)),
                ("interval", f"{cfg.interval_s:g}"),
                ("max-spread-mib", f"{cfg.max_spread_mib:g}"),
            ),
        )

    def _on_verdict(self, verdict: GpuVerdict, now: float) -> list[Outcome]:
        # The same id in every partition that hears the verdict (on Kafka each does): the
        # verification's own, else the verdict's time, never a partition's clock.
        when = verdict.at if verdict.at is not None else now
        incident = verdict.incident or incident_id("gpu-memory", verdict.node, str(when))
        if verdict.stable:
            was = self._unsettled.pop(verdict.node, None)
            return [] if was is None else [_settled(verdict.node, was[1], incident, now,
                                                    self.config.gpu_memory.cordon)]  # fmt: skip
        if verdict.node not in self._unsettled and len(self._unsettled) >= _UNSETTLED:
            del self._unsettled[min(self._unsettled, key=lambda n: self._unsettled[n][0])]
        self._unsettled[verdict.node] = (now, incident)
        reason = f"GPU memory on {verdict.node} did not settle: {verdict.detail or 'unstable'}"
        # Pods scheduled there hang in engine init and are deleted, and their replacements
        # land there again (its GPUs are the freest): in the simulator, a fleet with such
        # nodes and no cordon had a P99 time to Ready 1.6-1.8x its own with them cordoned
        # (docs/simulation-defaults.md, "Cordoning unsettled nodes": up to 6x).
        then = _CORDONING if self.config.gpu_memory.cordon else _UNCORDONED
        out: list[Outcome] = [
            Decision("notify", "", verdict.node, f"{reason}; {then}", incident, now),
        ]
        if self.config.gpu_memory.cordon:
            # One cordon per node: a warmup's verification reports every node under one id.
            # Told in the node's thread, as its pods' deletions are: one line in the channel.
            cordon = incident_id("cordon", incident, verdict.node)
            out.append(Decision("cordon-node", "", verdict.node, reason, cordon, now,
                                told_under=incident))  # fmt: skip
        return out

    # ---- workloads --------------------------------------------------------------------
    def _on_workload(self, seen: WorkloadSeen, now: float) -> list[Outcome]:
        key = workload_key(seen.namespace, seen.kind, seen.name)
        before = self.workloads.get(key)
        if seen.watch == "DELETED":
            self.workloads.pop(key, None)
            return []
        if self._hedging and seen.hedges:
            self._note_racing(seen, now)
        if self._waiting and before is not None:
            self._races_ended(before.hedges, seen.hedges, now)
        cfg = self.config.image_update
        self.workloads[key] = workload_of(cfg, seen)
        outcome = image_update(cfg, before, seen, now, self.workloads.values())
        return [outcome] if outcome is not None else []


def _settled(node: str, told: str, incident: str, now: float, cordoned: bool) -> Decision:
    """A node found unsettled is found settled: said in the thread that told of it."""
    then = "its pods are judged as any other's again"
    if cordoned:
        # (unless a guardrail held the cordon: cordon_cap, the kill switch, a dry run)
        then += "; if remediator cordoned it, uncordoning is left to you (kubectl uncordon)"
    reason = f"GPU memory on {node} settled, as a verification found it; {then}"
    return Decision("notify", "", node, reason, incident_id("settled", incident, node), now,
                    told_under=told)  # fmt: skip


_UNSETTLED: Final = 4096  # nodes remembered unsettled: a cluster's GPU nodes, and then some
_CORDONING = "cordoning it (unless guardrails hold that: then by hand, kubectl cordon)"
_UNCORDONED = (
    "new pods scheduled there may hang in engine init and their replacements land there "
    "again: cordon it (kubectl cordon), or let remediator (gpu_memory.cordon: true, with "
    "the cordon-nodes component in deploy/)"
)


# ---- the rules: what each takes, what it arms ------------------------------------------------
Decide = Callable[[PolicyEngine, Any, float], list[Outcome]]


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule's registration. `takes`: the input kinds it decides on, through `decide`
    (every rule also sees each timeline change: `_on_change`); `timers`: the timers it arms,
    fired by `advance` (a pod's phases, or held work asked again)."""

    name: str  # its section of the policy file (policy/config.py)
    takes: tuple[type[Any], ...]
    decide: Decide
    timers: tuple[str, ...] = ()


RULES: tuple[Rule, ...] = (
    Rule(
        "stuck_pod", (AlertSeen, EngineStep, EngineSpan), PolicyEngine._on_stuck, tuple(UNFINISHED)
    ),  # fmt: skip
    Rule("gpu_memory", (AlertSeen, GpuVerdict), PolicyEngine._on_gpu),
    Rule("image_update", (WorkloadSeen,), PolicyEngine._on_workload, ("held work",)),
)


def _takes(rules: tuple[Rule, ...]) -> dict[type[Any], tuple[Decide, ...]]:
    table: dict[type[Any], tuple[Decide, ...]] = {}
    for rule in rules:
        for kind in rule.takes:
            table[kind] = (*table.get(kind, ()), rule.decide)
    return table


_TAKES: Final = _takes(RULES)
