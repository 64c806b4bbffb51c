"""The event loop: the cluster moves in virtual time, the controller watches and decides,
its decisions are carried out (a deleted pod is replaced by its ReplicaSet, a warmup
restart pre-pulls the image on every node, a cordoned node takes no new pods, a hedge
surges the Deployment by one until the first of the two pods is Ready).

Virtual time is seconds from the start of the run; what the core sees is epoch seconds
(`kube.wall`). Nothing here sleeps or reads a clock.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import IO, Any

from remediator.contract.decision import Decision
from remediator.inputs.decode import decode
from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.records import Input, WatchType
from remediator.policy.config import MAX_HEDGE_S
from remediator.policy.due import DueQueue
from remediator.policy.incident import incident_id
from remediator.sim.fleet import steps, wire
from remediator.sim.fleet.calibration import PROFILES
from remediator.sim.fleet.cluster import Deployment, Node, Pod, Slot, node_name, rs_hash
from remediator.sim.fleet.controllers import (
    Controller,
    finds_hangs_after,
    log_follows,
    logs_wanted,
)
from remediator.sim.fleet.draws import PodDraws, mix, params, stable
from remediator.sim.fleet.kube import BASE_TIME, deployment_event, wall
from remediator.sim.fleet.results import RunResult
from remediator.sim.fleet.scenario import Scenario

# Event kinds on the heap.
_SCHED, _PULLED, _STARTED, _READY, _FIRST, _APPLY, _LOAD, _ROLL, _SHORT, _INPUT = range(10)
_PULL_RETRY, _UNSHORT, _LINE, _FOUND = 10, 11, 12, 13
DRAIN_S = {"tuned": 900.0, "untuned": 2400.0}  # after the load stops: in-flight cold starts end
BACKOFF_S = 10.0
ALERT_AFTER_S = 120.0  # GPUMemoryUnstable fires this long after engine init began on the node
VERIFY_S = 60.0  # the verify-gpu-memory workflow's sampling, start to verdict
FEASIBLE_NODES = 16  # nodes scored per pod (kube-scheduler samples large clusters too)


class UnknownSimAction(ValueError):
    """A decision whose action the simulator has no model of: its bug, or a new action
    that needs one (see `Simulation._appliers`)."""


class Simulation:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        controller: Controller,
        *,
        record: IO[bytes] | None = None,
        wire_json: bool = False,
        observer: Callable[[str, float, object], None] | None = None,
    ) -> None:
        self.sc = scenario
        self.seed = seed
        self.ctl = controller
        self.record = record
        self.wire_json = wire_json
        self.observer = observer
        self.profile = PROFILES[scenario.profile]
        self._params = params(self.profile)
        faults = scenario.faults
        slow_from = scenario.node_count - faults.slow_gpu_nodes
        self.nodes = [
            Node(
                node_name(i),
                scenario.gpus_per_node,
                i < faults.unsettled_gpu_nodes,
                faults.slow_gpu_factor if i >= slow_from else 1.0,
            )
            for i in range(scenario.node_count)
        ]
        self.deps = [Deployment(spec) for spec in scenario.deployments]
        self.events: DueQueue[tuple[int, object]] = DueQueue()  # (kind, obj) by time
        self.now = 0.0
        self.pending: deque[Pod] = deque()
        self.pods_made = 0
        self.slots_made = 0
        self.result = RunResult(controller.name, scenario.name, seed)
        self._waves: dict[tuple[int, str], int] = {}
        self._by_uid: dict[str, Pod] = {}
        self._rolled: dict[int, tuple[str, int]] = {}
        self._next_node = 0
        self._pack = scenario.node_scoring == "pack"
        self._appliers: dict[str, Callable[[Decision], None]] = {
            "delete-pod": self._delete_pod,
            "restart-warmup": self._restart_warmup,
            "verify-gpu-memory": self._verify_gpu_memory,
            "cordon-node": self._cordon_node,
            "hedge-pod": self._hedge_pod,
            "notify": self._notify,
        }
        self.end = scenario.duration_s + DRAIN_S[scenario.profile]
        # Nobody listens (no remediation, no recording): do not build what nobody reads.
        self._loud = controller.wants_inputs or record is not None or wire_json
        # Someone listens, to typed records only (no file, no JSON): fed straight through.
        self._typed = controller.wants_inputs and record is None and not wire_json
        self._feed = controller.feed
        # The controller's log follower: how many pods in engine init it reads at once (0:
        # none), oldest first, each from its first line (remediator/sources/engine_logs.py).
        self._follow_max = log_follows(controller)
        self._finds_hangs = finds_hangs_after(controller)  # (an Oracle only)
        self._following = 0
        self._awaiting: deque[Pod] = deque()

    # ---- the loop -------------------------------------------------------------------------
    def run(self) -> RunResult:
        for i, dep in enumerate(self.deps):
            self._workload(dep, "ADDED")
            self._scale_to(dep, dep.desired, i)
            if self.sc.scale is not None:
                self._push(self.sc.scale.every_s * (1 + i / len(self.deps)), _LOAD, dep)
            if self.sc.rollout_every_s is not None:
                self._push(self.sc.rollout_every_s * (1 + i / len(self.deps)) / 2, _ROLL, dep)
        shortage = self.sc.faults.gpu_shortage
        if shortage is not None:
            self._push(shortage.at, _SHORT, shortage.nodes)
        handlers = self._handlers()
        if self.ctl.wants_inputs:
            self._loop_watched(handlers)
        else:
            events, end = self.events, self.end
            while (first := events.first()) is not None and first <= end:
                t, (kind, obj) = events.pop()
                self.now = t
                handlers[kind](obj)
        self.now = self.end
        if self.ctl.wants_inputs:
            self.ctl.advance(wall(self.end))
        self.result.close(self, self.ctl.held())
        return self.result

    def _loop_watched(self, handlers: list[Callable[[Any], None]]) -> None:
        """The loop with a controller watching: before each event its clock moves to the
        event's wall second and what it decided meanwhile is carried out; its own timers
        wake the loop too (a budget lapses in silence). Hot: names are bound once."""
        events, end, base = self.events, self.end, BASE_TIME
        ctl = self.ctl
        next_due, advance, take, decided = ctl.next_due, ctl.advance, ctl.take, self._decided
        # Pods the controller asks to read before it judges them (its timers fire in advance)
        wanted = logs_wanted(ctl) if self._follow_max else None
        seen = -1  # the wall second the controller was last moved to by an event
        while True:
            first = events.first()
            t = first if first is not None else math.inf
            due = next_due()
            if due is not None:
                virtual = due - base
                if virtual < t and virtual <= end:
                    if virtual > self.now:
                        self.now = virtual
                    advance(due)
                    if wanted is not None and (uids := wanted()):
                        self._read_first(uids)
                    for d in take():
                        decided(d)
                    continue
            if t > end:
                return
            t, (kind, obj) = events.pop()
            self.now = t
            second = base + math.floor(t)  # wall(t)
            if second != seen:  # (the controller's clock is there already otherwise)
                seen = second
                advance(float(second))
                if wanted is not None and (uids := wanted()):
                    self._read_first(uids)
            for d in take():  # (what the last event's inputs decided, too)
                decided(d)
            handlers[kind](obj)

    def _handlers(self) -> list[Callable[[Any], None]]:
        """Each event kind's handler, indexed by kind."""
        by_kind: dict[int, Callable[[Any], None]] = {
            _SCHED: self._try_schedule,
            _PULLED: self._pulled,
            _PULL_RETRY: self._pull,
            _STARTED: self._started,
            _READY: self._ready,
            _FIRST: self._first_token,
            _APPLY: self._apply,
            _LOAD: self._load,
            _ROLL: self._rollout,
            _SHORT: self._shortage,
            _UNSHORT: self._shortage_over,
            _INPUT: self._input,
            _LINE: self._line,
            _FOUND: self._hang_found,
        }
        return [by_kind[kind] for kind in range(len(by_kind))]

    def _push(self, t: float, kind: int, obj: object) -> None:
        self.events.push(t, (kind, obj))

    def _pod(self, pod: Pod, stage: str, watch: WatchType = "MODIFIED") -> None:
        if self._typed:
            self._feed(wire.pod_record(pod, stage, watch))
        elif self._loud:
            self._emit(wire.pod_record(pod, stage, watch), pod)

    def _event(self, pod: Pod, reason: str, message: str) -> None:
        if self._typed:
            self._feed(wire.event_record(pod, reason, message, self.now))
        elif self._loud:
            self._emit(wire.event_record(pod, reason, message, self.now), pod)

    def _emit(self, item: Input, pod: Pod | None = None) -> None:
        if self.record is not None or self.wire_json:
            line = wire.as_json(item, pod)
            if self.record is not None:
                self.record.write(line + b"\n")
            if self.wire_json:
                for decoded in decode(line):
                    self.ctl.feed(decoded)
                return
        self.ctl.feed(item)

    def _emit_raw(self, line: bytes) -> None:
        """Objects the core decodes from JSON on every path (workloads, alerts, verdicts)."""
        if not self._loud:
            return
        if self.record is not None:
            self.record.write(line + b"\n")
        if self.ctl.wants_inputs:
            for item in decode(line):
                self.ctl.feed(item)

    def _see(self, what: str, obj: object) -> None:
        if self.observer is not None:
            self.observer(what, self.now, obj)

    # ---- pods -----------------------------------------------------------------------------
    def _new_slot(self, dep_index: int, wave: str, k: int) -> Slot:
        self.slots_made += 1
        slot = Slot(mix(self.seed, dep_index, stable(wave), k), self.deps[dep_index]
                    .spec.name, self.now)  # fmt: skip
        return slot

    def _create(self, dep: Deployment, slot: Slot, old_rs: bool = False) -> Pod:
        slot.pods += 1
        draws = PodDraws(mix(slot.id, slot.pods), self._params)
        faults = self.sc.faults
        u = draws.u(1)
        fate = "ok"
        if u < faults.engine_init_hang or self.pods_made < faults.hang_first:
            fate = "init_hang"
        elif u < faults.engine_init_hang + faults.driver_hang:
            fate = "driver_hang"
        pod = Pod(self.pods_made, dep, slot, self.now, fate, draws)
        self.pods_made += 1
        (dep.old if old_rs else dep.pods)[pod.uid] = pod
        slot.live.append(pod)
        self._by_uid[pod.uid] = pod
        self._pod(pod, "pending", "ADDED")
        self._push(self.now + draws.phase("scheduling", 10), _SCHED, pod)
        self._see("created", pod)
        return pod

    def _try_schedule(self, pod: Pod) -> None:
        if not pod.alive or pod.scheduled is not None:
            return
        node = self._pick_node(pod)
        if node is None:
            if not pod.unsched_sent:
                pod.unsched_sent = True
                self._pod(pod, "unschedulable")
            if pod.pending_since is None:
                pod.pending_since = self.now
                self.pending.append(pod)
            return
        node.free -= pod.dep.spec.tp
        pod.node, pod.scheduled = node, self.now
        self._pod(pod, "scheduled")
        self._see("scheduled", pod)
        self._racing(pod)
        self._pull(pod)

    def _pick_node(self, pod: Pod) -> Node | None:
        """As kube-scheduler does on a large cluster: from a rotating start, find a few
        feasible nodes (numFeasibleNodesToFind) and take the best scored: the image already
        there (ImageLocality), then the most free GPUs (LeastAllocated), or the fewest where
        the scenario's nodes pack (MostAllocated)."""
        need, image, nodes = pod.dep.spec.tp, pod.image, self.nodes
        n = len(nodes)
        pack = self._pack
        best, best_score, found = None, -1.0, 0
        start = self._next_node
        i = start - 1
        for k in range(n):  # (every node once, from `start` round to it)
            i += 1
            if i == n:
                i = 0
            node = nodes[i]
            if node.free < need or node.cordoned or node.lost:
                continue
            score = (node.gpus - node.free if pack else node.free) + (
                100.0 if image in node.images else 0.0
            )
            if score > best_score:
                best, best_score = node, score
            found += 1
            if found >= FEASIBLE_NODES:
                self._next_node = (start + k + 1) % n
                break
        return best

    def _pull(self, pod: Pod) -> None:
        if not pod.alive:
            return
        node, image, t = pod.node, pod.image, self.now
        assert node is not None
        have = node.images.get(image)
        if have is not None and have <= t and pod.pull_start is None:
            self._event(pod, "Pulled", wire.pulled_message(image, None))
            self._container_start(pod)
            return
        if pod.pull_start is None:
            pod.pull_start = t
            self._event(pod, "Pulling", f'Pulling image "{image}"')
        if have == math.inf:
            # Another pod's pull is failing: this one's own try fails the same way and backs
            # off (the kubelet's ImagePullBackOff), then tries again.
            self._push(t + BACKOFF_S, _PULL_RETRY, pod)
            return
        if have is not None and have > t:
            self._push(have, _PULLED, pod)  # another pod is pulling it onto this node
            return
        faults = self.sc.faults
        seconds = pod.draws.phase("image_pull", 20) * faults.registry_slow
        first_try = pod.pull_start == t
        if first_try and pod.draws.u(30 + pod.slot.pods) < faults.registry_fail and have is None:
            # The pull fails once (a 503 from the registry); its retry after a back-off goes
            # through. Meanwhile the node's other pods that need the image fail and retry too.
            at = t + 0.3 * seconds
            self._push(at, _INPUT, ("pull-failed", pod))
            self._push(at + BACKOFF_S, _PULL_RETRY, pod)
            node.images[image] = math.inf
            return
        node.images[image] = t + seconds
        self._push(t + seconds, _PULLED, pod)

    def _pulled(self, pod: Pod) -> None:
        if not pod.alive:
            return
        assert pod.pull_start is not None
        pod.pulled = self.now
        seconds = self.now - pod.pull_start
        self._event(pod, "Pulled", wire.pulled_message(pod.image, seconds))
        self._container_start(pod)

    def _container_start(self, pod: Pod) -> None:
        if pod.fate == "driver_hang":
            pod.hang_at = self.now
            self._hangs(pod)
            return
        self._push(self.now + pod.draws.phase("container_start", 40), _STARTED, pod)

    def _started(self, pod: Pod) -> None:
        if not pod.alive:
            return
        pod.started = self.now
        self._pod(pod, "running")
        self._see("started", pod)
        node = pod.node
        assert node is not None
        init = pod.draws.phase("engine_init", 50) * node.pace
        if node.unsettled and not node.alerted:
            node.alerted = True
            self._push(self.now + ALERT_AFTER_S, _INPUT, ("alert", node))
        if pod.fate == "init_hang" or node.unsettled:
            # It hangs in one of vLLM's steps: its log shows the steps before that one.
            lines = steps.line_offsets(pod.draws, init)
            logged = steps.hang_lines(pod.draws.u(60))
            pod.lines = lines[:logged]
            pod.hang_at = self.now + (lines[logged - 1] if logged else 0.0)
            self._log_begins(pod)
            self._hangs(pod)
            return
        pod.would_ready = self.now + init
        self._push(pod.would_ready, _READY, pod)
        if self._follow_max:
            pod.lines = steps.line_offsets(pod.draws, init)
            self._log_begins(pod)

    def _hangs(self, pod: Pod) -> None:
        """`pod` hangs from `pod.hang_at` on: an Oracle controller finds it after its delay."""
        if self._finds_hangs is not None and pod.hang_at is not None:
            self._push(pod.hang_at + self._finds_hangs, _FOUND, pod)

    def _hang_found(self, pod: Pod) -> None:
        """The Oracle's finding: the hung pod is deleted as the core's decision would be."""
        if not pod.alive or pod.ready is not None:
            return
        assert pod.hang_at is not None
        ns = pod.dep.spec.namespace
        why = f"oracle: hung since {pod.hang_at:.0f}s"
        self._decided(Decision(
            action="delete-pod", namespace=ns, target=pod.name, uid=pod.uid, reason=why,
            incident=incident_id("oracle", pod.uid), at=wall(self.now),
            workload=f"{ns}/Deployment/{pod.dep.spec.name}",
        ))  # fmt: skip

    def _ready(self, pod: Pod) -> None:
        if not pod.alive:
            return
        pod.ready = self.now
        if pod.followed:
            self._let_go(pod)
        self._pod(pod, "ready")
        self._see("ready", pod)
        slot = pod.slot
        if slot.ready is None and not slot.cancelled:
            slot.ready = self.now
            self.result.slot_ready(slot)
        self._push(self.now + pod.draws.phase("first_token", 70), _FIRST, pod)
        self.result.cold_start(pod, self.now)
        if len(slot.live) > 1:
            self._hedge_won(pod)
        dep = pod.dep
        if dep.rolling and pod.uid in dep.pods:
            self._roll_on(dep)

    def _first_token(self, pod: Pod) -> None:
        if not pod.alive:
            return
        pod.first_token = self.now
        if self._loud:
            self._emit(wire.first_token_record(pod, self.now), pod)
        slot = pod.slot
        if slot.first_token is None and slot.ready is not None:
            slot.first_token = self.now
            self.result.slot_first_token(slot)

    def _delete(self, pod: Pod, why: str) -> None:
        if pod.dep.hedging and len(pod.slot.live) > 1:
            self._hedge_ends(pod)  # one of a hedged replica's two pods goes: the hedge ends
        pod.deleted, pod.removed_by = self.now, why
        if pod.followed:
            self._let_go(pod)
        if pod.ready is None:
            self.result.cold_start(pod, self.now)
        dep = pod.dep
        dep.pods.pop(pod.uid, None)
        dep.old.pop(pod.uid, None)
        pod.slot.live.remove(pod)
        self._by_uid.pop(pod.uid, None)
        stage = "ready" if pod.ready else "running" if pod.started else (
            "scheduled" if pod.scheduled is not None else "pending")  # fmt: skip
        self._pod(pod, stage, "DELETED")
        self._see("deleted", pod)
        if pod.node is not None and pod.scheduled is not None:
            pod.node.free += dep.spec.tp
            self._schedule_pending()

    def _cancel(self, slot: Slot) -> None:
        """The replica is no longer wanted; one never served counts as waited till now."""
        if not slot.cancelled and slot.ready is None:
            self.result.unserved(slot, self.now)
            self._see("unserved", slot)
        slot.cancelled = True

    def _schedule_pending(self) -> None:
        while self.pending:
            pod = self.pending[0]
            if not pod.alive or pod.scheduled is not None:
                self.pending.popleft()
                continue
            if self._pick_node(pod) is None:
                return
            self.pending.popleft()
            self._try_schedule(pod)

    # ---- engine logs ----------------------------------------------------------------------
    def _log_begins(self, pod: Pod) -> None:
        """The pod is in engine init: the follower takes its log when it has room."""
        if self._follow_max:
            self._awaiting.append(pod)
            self._follow_more()

    def _follow_more(self) -> None:
        """Follow the oldest pods in engine init up to the bound; a log followed late is read
        from its first line (each line with its own time)."""
        while self._following < self._follow_max and self._awaiting:
            pod = self._awaiting.popleft()
            if not pod.alive or pod.ready is not None or pod.followed:
                continue
            self._follow(pod)

    def _read_first(self, uids: list[str]) -> None:
        """The pods the core would judge on their phase budget alone, their log never read
        (`PolicyEngine.logs_wanted`): followed now, up to the bound again beyond it, as
        serve's follower does."""
        for uid in uids:
            if self._following >= 2 * self._follow_max:
                return
            pod = self._by_uid.get(uid)
            if pod is None or pod.followed or not pod.alive or pod.ready is not None:
                continue
            if pod.started is not None:
                self._follow(pod)

    def _follow(self, pod: Pod) -> None:
        """Read the pod's log from its first line (each line with its own time), and each
        line after as it is written."""
        pod.followed = True
        if pod.followed_at is None:
            pod.followed_at = self.now
        self._following += 1
        assert pod.started is not None
        for i, offset in enumerate(pod.lines):
            at = pod.started + offset
            if at <= self.now:
                self._emit_line(pod, i)
            else:
                self._push(at, _LINE, (pod, i))

    def _let_go(self, pod: Pod) -> None:
        """The pod left engine init: its follow ends, another pod's may begin."""
        pod.followed = False
        self._following -= 1
        self._follow_more()

    def _line(self, obj: tuple[Pod, int]) -> None:
        pod, i = obj
        if pod.followed:
            self._emit_line(pod, i)

    def _emit_line(self, pod: Pod, i: int) -> None:
        assert pod.started is not None
        at = float(BASE_TIME + math.floor(pod.started + pod.lines[i]))  # wall()
        spec = pod.dep.spec
        item = steps.record(i, pod.lines, spec.namespace, pod.name, pod.uid, at)
        if self.record is None and not self.wire_json:
            self.ctl.feed(item)
            return
        line = steps.log_json(item, steps.text(i, pod.lines, at))
        if self.record is not None:
            self.record.write(line + b"\n")
        if self.wire_json:
            for decoded in decode(line):
                self.ctl.feed(decoded)
        else:
            self.ctl.feed(item)

    # ---- hedging (the hedge-pod action, as workflows/hedge-stalled-pod.yaml's step does it) --
    def _hedge_pod(self, d: Decision) -> None:
        """Surge the pod's Deployment by one: its ReplicaSet starts a pod for the same replica.
        As the step: nothing for a pod gone or Ready, a replica hedged already (the
        Deployment's annotation), or a Deployment rolling out (refused, exit 3). Other pods of
        the Deployment may be hedged meanwhile, each surging by one."""
        pod = self._by_uid.get(d.uid or "")
        if pod is None or not pod.alive or pod.ready is not None:
            return
        slot, dep = pod.slot, pod.dep
        if len(slot.live) > 1 or slot.ready is not None or dep.rolling or pod in dep.hedging:
            why = ("its Deployment is rolling out" if dep.rolling
                   else "its replica is Ready" if slot.ready is not None
                   else "its replica has a second pod already")  # fmt: skip
            self._see("hedge refused", (pod, why))
            return
        self.result.hedges += 1
        dep.hedging.append(pod)
        before = tuple(sorted(p.uid for p in (*dep.pods.values(), *dep.old.values())))
        timeout = float(dict(d.params).get("timeout", MAX_HEDGE_S))
        note = Hedge(pod.name, pod.uid, dep.desired, before, wall(self.now) + timeout)
        dep.hedge_notes[pod.uid] = note
        self._workload(dep)  # replicas + 1
        copy = self._create(dep, slot, old_rs=pod.rs_hash != dep.rs_hash)
        copy.hedge = True

    def _racing(self, pod: Pod) -> None:
        """A hedged replica's new pod has a node: the step says it races (its annotation)."""
        dep = pod.dep
        stalled = next((p for p in dep.hedging if p.slot is pod.slot), None)
        if stalled is None or stalled is pod:
            return
        note = dep.hedge_notes[stalled.uid]
        if note.racing is None:
            since = wall(pod.scheduled) if pod.scheduled is not None else None
            dep.hedge_notes[stalled.uid] = replace(note, racing=pod.uid, racing_since=since)
            self._workload(dep)

    def _hedge_won(self, winner: Pod) -> None:
        """The first of the two Ready serves the replica: the other is deleted."""
        for other in [o for o in winner.slot.live if o is not winner]:
            self._delete(other, "hedge")

    def _hedge_ends(self, pod: Pod) -> None:
        """The hedge of `pod`'s replica ends: the GPUs its second pod held beside the first
        are counted, and the Deployment returns by one toward its replica count."""
        live = pod.slot.live
        dep = pod.dep
        stalled = next((p for p in live if p in dep.hedging), None)
        if len(live) < 2 or stalled is None:
            return
        second = max(live, key=lambda p: p.created)
        if second.scheduled is not None:
            self.result.hedge_gpu_seconds += (self.now - second.scheduled) * dep.spec.tp
        dep.hedging.remove(stalled)
        del dep.hedge_notes[stalled.uid]
        self._workload(dep)

    # ---- decisions ------------------------------------------------------------------------
    def _decided(self, d: Decision) -> None:
        self.result.action(d)
        self._see("decision", d)
        at = max(self.now, d.at - BASE_TIME) + self.sc.executor_delay_s
        self._push(at, _APPLY, d)

    def _apply(self, d: Decision) -> None:
        """The workflow's step runs: each action as its WorkflowTemplate would do it. An
        action the simulator cannot carry out is an error, never a silent no-op: a run
        that skipped it would score a policy on something that never happened."""
        apply = self._appliers.get(d.action)
        if apply is None:
            raise UnknownSimAction(
                f"the fleet simulator cannot apply action {d.action!r} "
                f"(incident {d.incident}, target {d.where}); it applies: "
                f"{', '.join(sorted(self._appliers))}"
            )
        self.ctl.applied(d)  # the workflow's step has run: it ends (Succeeded)
        apply(d)

    def _delete_pod(self, d: Decision) -> None:
        pod = self._by_uid.get(d.uid or "")
        if pod is None or not pod.alive:
            return  # the precondition: only the pod the decision was about
        self.result.remediated(pod)
        pod.slot.kills += 1
        self._delete(pod, "remediation")  # hedged: the hedge pod takes its place
        dep = pod.dep
        hedged = bool(pod.slot.live)
        if not hedged and not pod.slot.cancelled:
            self._create(dep, pod.slot, old_rs=pod.rs_hash != dep.rs_hash)

    def _restart_warmup(self, d: Decision) -> None:
        image = d.param("image")
        if image:
            for node in self.nodes:
                if node.schedulable and image not in node.images:
                    draws = PodDraws(mix(self.seed, stable(node.name), stable(image)), self._params)
                    # The same registry as the pods' pulls: as slow or as fast.
                    seconds = draws.phase("image_pull", 20) * self.sc.faults.registry_slow
                    node.images[image] = self.now + seconds

    def _verify_gpu_memory(self, d: Decision) -> None:
        self._push(self.now + VERIFY_S, _INPUT, ("verdict", d))

    def _cordon_node(self, d: Decision) -> None:
        for node in self.nodes:
            if node.name == d.target:
                node.cordoned = True

    def _notify(self, d: Decision) -> None:
        return None  # a message to people: nothing in the cluster changes

    def _input(self, obj: object) -> None:
        assert isinstance(obj, tuple)
        what: str = obj[0]
        subject: Any = obj[1]
        if what == "pull-failed":
            pod: Pod = subject
            node = pod.node
            assert node is not None
            if node.images.get(pod.image) == math.inf:
                # The failed pull is over, whether or not its pod is still there (a pod
                # deleted mid-pull must not leave the node "pulling" for good).
                del node.images[pod.image]
            if not pod.alive:
                return
            msg = f'Failed to pull image "{pod.image}": rpc error: code = Unknown desc = 503'
            self._event(pod, "Failed", msg)
        elif what == "alert":
            self._emit_raw(wire.alert_json(subject.name, self.now))
        elif what == "verdict":
            d: Decision = subject
            unstable = any(n.name == d.target and n.unsettled for n in self.nodes)
            self._emit_raw(wire.verdict_json(d, not unstable, self.now))

    # ---- load -----------------------------------------------------------------------------
    def _workload(self, dep: Deployment, watch: str = "MODIFIED") -> None:
        ready = sum(1 for p in dep.pods.values() if p.ready is not None)
        replicas = dep.desired + len(dep.hedging)  # surged by one for each hedge
        line = deployment_event(
            dep.spec.name, dep.spec.model, dep.image, replicas=replicas, ready=ready,
            generation=dep.generation, watch=watch, namespace=dep.spec.namespace,
            at=int(wall(self.now)), pods=len(dep.pods) + len(dep.old), updated=len(dep.pods),
            tp=dep.spec.tp, hedges=tuple(dep.hedge_notes.values()),
        )  # fmt: skip
        self._emit_raw(line)

    def _wave(self, dep_index: int, what: str) -> str:
        n = self._waves.get((dep_index, what), 0) + 1
        self._waves[(dep_index, what)] = n
        return f"{what}-{n}"

    def _scale_to(self, dep: Deployment, desired: int, dep_index: int) -> None:
        """Scaled as the Deployment controller does it, mid-rollout too (even one stuck behind
        a pod that never becomes Ready: the load's replicas are asked for and waited for
        whatever the rollout does). New replicas come from the current template; a scale-down
        takes pods not Ready first, newest first, of either ReplicaSet."""
        dep.desired = desired
        have = [*dep.pods.values(), *dep.old.values()]
        if len(have) < desired:
            wave = self._wave(dep_index, "scale")
            for k in range(desired - len(have)):
                self._create(dep, self._new_slot(dep_index, wave, k))
            return
        ranked = sorted(have, key=lambda p: (p.ready is not None, -p.created))
        for pod in ranked[: len(have) - desired]:
            self._cancel(pod.slot)
            self._delete(pod, "scale")
        if dep.rolling and all(p.ready is not None for p in dep.pods.values()):
            self._resume(dep)  # nothing new left starting, which a rollout moves on from

    def _resume(self, dep: Deployment) -> None:
        """A rollout whose new pods are all Ready: done if they are enough, else it surges."""
        if len(dep.pods) < dep.desired:
            self._surge(dep)
            return
        for pod in list(dep.old.values()):
            self._delete(pod, "rollout")
        dep.rolling = False
        self._workload(dep)

    def _surge(self, dep: Deployment) -> None:
        for _ in range(max(1, math.ceil(dep.desired * 0.25))):  # maxSurge 25%
            self._roll_new(dep)

    def _load(self, dep: Deployment) -> None:
        scale = self.sc.scale
        assert scale is not None
        if self.now >= self.sc.duration_s:
            return
        self._push(self.now + scale.every_s, _LOAD, dep)
        desired = scale.high if dep.desired != scale.high else scale.low
        self._scale_to(dep, desired, self.deps.index(dep))
        self._workload(dep)

    def _rollout(self, dep: Deployment) -> None:
        every = self.sc.rollout_every_s
        assert every is not None
        if self.now >= self.sc.duration_s:
            return
        self._push(self.now + every, _ROLL, dep)
        if dep.rolling:
            return
        i = self.deps.index(dep)
        dep.generation += 1
        dep.image = f"{dep.spec.image}-r{dep.generation}"
        dep.rs_hash = rs_hash(dep.spec.name, dep.image)
        dep.rolling = True
        dep.old, dep.pods = dep.pods, {}
        for pod in [p for p in dep.old.values() if p.ready is None]:
            self._cancel(pod.slot)
            self._delete(pod, "rollout")
        self._workload(dep)
        wave = self._wave(i, "rollout")
        self._rolled[id(dep)] = (wave, 0)
        self._surge(dep)
        if not dep.old and len(dep.pods) >= dep.desired:
            dep.rolling = False  # nothing old was Ready: done at once, as the watch says
            self._workload(dep)

    def _roll_new(self, dep: Deployment) -> None:
        if len(dep.pods) >= dep.desired:
            return
        wave, k = self._rolled[id(dep)]
        self._rolled[id(dep)] = (wave, k + 1)
        self._create(dep, self._new_slot(self.deps.index(dep), wave, k))

    def _roll_on(self, dep: Deployment) -> None:
        if dep.old:
            self._delete(next(iter(dep.old.values())), "rollout")
        self._roll_new(dep)
        if not dep.old and len(dep.pods) >= dep.desired:
            dep.rolling = False
            self._workload(dep)

    def _shortage(self, count: int) -> None:
        lost = [n for n in self.nodes if n.schedulable][-count:]
        for node in lost:
            node.lost = True
            for dep in self.deps:
                alive = [*dep.pods.values(), *dep.old.values()]
                for pod in [p for p in alive if p.node is node and p.scheduled is not None]:
                    self._delete(pod, "shortage")
                    if pod.slot.ready is None:
                        self._create(dep, pod.slot)
                    else:
                        self._create(
                            dep, self._new_slot(self.deps.index(dep), "shortage", pod.index)
                        )
        shortage = self.sc.faults.gpu_shortage
        assert shortage is not None
        self._push(self.now + shortage.for_s, _UNSHORT, lost)

    def _shortage_over(self, lost: list[Node]) -> None:
        for node in lost:
            node.lost = False
            node.free = node.gpus
        self._schedule_pending()
