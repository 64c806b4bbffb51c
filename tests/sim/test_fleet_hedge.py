"""The simulator applies `hedge-pod` as its workflow's step does (workflows/hedge-stalled-pod.yaml):
the Deployment is surged by one (its watch shows replicas + 1), the ReplicaSet starts a pod for
the same replica, the first of the two Ready serves it, the other is deleted, and the Deployment
returns to its count. A scripted controller decides the hedge, so the applier is what is tested.
"""

from __future__ import annotations

from dataclasses import replace

from remediator.contract.decision import Decision
from remediator.inputs.hedge_annotation import Hedge
from remediator.inputs.records import Input, WorkloadSeen
from remediator.policy.config import MAX_HEDGE_S
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.compare import builtin_policies, without_hedging
from remediator.sim.fleet.kube import BASE_TIME, wall
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, Scenario
from remediator.sim.fleet.simulation import Simulation

SCENARIO = Scenario(
    name="hedge", profile="tuned", duration_s=900, seeds=(3,), node_count=2, gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 2),),
    faults=Faults(hang_first=1),
)  # fmt: skip


class Scripted:
    """Decides what the test tells it, at the virtual second it says; watches replicas."""

    name = "scripted"
    wants_inputs = True

    def __init__(self) -> None:
        self.plan: list[tuple[float, Decision]] = []
        self.out: list[Decision] = []
        self.applied_: list[Decision] = []
        self.replicas: list[int | None] = []
        self.hedges: list[tuple[Hedge, ...]] = []  # the hedge step's annotation, as watched

    def at(self, virtual: float, action: str, pod: Pod) -> None:
        spec = pod.dep.spec
        d = Decision(action, spec.namespace, pod.name, "test",  # type: ignore[arg-type]
                     f"{action}-{pod.uid}", BASE_TIME + virtual, uid=pod.uid,
                     workload=f"{spec.namespace}/Deployment/{spec.name}")  # fmt: skip
        self.plan.append((BASE_TIME + virtual, d))

    def feed(self, item: Input) -> None:
        if isinstance(item, WorkloadSeen):
            self.replicas.append(item.replicas)
            self.hedges.append(item.hedges)

    def advance(self, now: float) -> None:
        self.out += [d for due, d in self.plan if due <= now]
        self.plan = [(due, d) for due, d in self.plan if due > now]

    def next_due(self) -> float | None:
        return min((due for due, _ in self.plan), default=None)

    def take(self) -> list[Decision]:
        out, self.out = self.out, []
        return out

    def applied(self, decision: Decision) -> None:
        self.applied_.append(decision)

    def held(self) -> int:
        return 0


def _run(script: object, scenario: Scenario = SCENARIO) -> tuple[Scripted, list[tuple[str, Pod]]]:
    """Run with the controller; `script(ctl, what, now, obj)` plans decisions as pods go."""
    ctl = Scripted()
    seen: list[tuple[str, Pod]] = []

    def watch(what: str, now: float, obj: object) -> None:
        if isinstance(obj, Pod):
            seen.append((what, obj))
        script(ctl, what, now, obj)  # type: ignore[operator]

    ctl.result = Simulation(scenario, 3, ctl, observer=watch).run()  # type: ignore[attr-defined]
    return ctl, seen


def _hedge_the_hung_pod(ctl: Scripted, what: str, now: float, obj: object) -> None:
    if what == "started" and isinstance(obj, Pod) and obj.fate == "init_hang":
        ctl.at(now + 30, "hedge-pod", obj)


def test_a_hedged_hung_pod_loses_to_its_hedge_and_the_deployment_returns_to_its_count() -> None:
    ctl, seen = _run(_hedge_the_hung_pod)
    result = ctl.result  # type: ignore[attr-defined]
    hung = next(p for w, p in seen if w == "started" and p.fate == "init_hang")
    hedge = next(p for w, p in seen if w == "created" and p.hedge)
    assert hedge.slot is hung.slot  # a second pod for the same replica
    assert hedge.ready is not None and hung.removed_by == "hedge"
    assert hung.deleted == hedge.ready  # the first Ready wins, the other goes at once
    assert hung.slot.ready == hedge.ready
    assert result.hedges == 1 and result.actions["hedge-pod"] == 1
    assert result.deletions == 0  # the hedge, not a remediation, removed the hung pod
    # The Deployment as its watch showed it: 2, surged to 3 by the hedge (and seen again
    # when the hedge pod got a node: the step's annotation names it racing), back to 2.
    assert ctl.replicas[0] == 2 and 3 in ctl.replicas and ctl.replicas[-1] == 2
    assert ctl.replicas.count(3) == 2
    (surged,), (racing,) = [h for h in ctl.hedges if h]
    assert (surged.uid, surged.pod, surged.racing) == (hung.uid, hung.name, None)
    assert hedge.scheduled is not None  # (named with when it was scheduled)
    assert racing == replace(surged, racing=hedge.uid, racing_since=wall(hedge.scheduled))
    assert hung.uid in surged.before and hedge.uid not in surged.before
    applied = BASE_TIME + hung.started + 30  # the decision's time (and the executor's delay)
    assert applied + MAX_HEDGE_S <= surged.deadline <= applied + MAX_HEDGE_S + 10  # (no param)
    assert ctl.hedges[-1] == ()  # the hedge ended: the annotation gone
    # The second pod's GPUs while both ran: 2 GPUs (TP) from its scheduling to its Ready.
    assert hedge.scheduled is not None
    assert result.hedge_gpu_seconds == (hedge.ready - hedge.scheduled) * 2
    assert [d.action for d in ctl.applied_] == ["hedge-pod"]


def test_a_stalled_pod_that_comes_ready_first_wins_and_the_hedge_pod_goes() -> None:
    def hedge_a_healthy_pod(ctl: Scripted, what: str, now: float, obj: object) -> None:
        first = not ctl.plan and not ctl.applied_
        if what == "started" and isinstance(obj, Pod) and obj.fate == "ok" and first:
            ctl.at(now + 1, "hedge-pod", obj)

    ctl, seen = _run(hedge_a_healthy_pod, replace(SCENARIO, faults=Faults()))
    hedge = next(p for w, p in seen if w == "created" and p.hedge)
    first = next(p for p in hedge.slot.live if not p.hedge)
    assert first.ready is not None and hedge.removed_by == "hedge"
    assert hedge.deleted == first.ready and hedge.ready is None
    assert ctl.replicas[-1] == 2 and ctl.replicas.count(3) == 2  # surged; its pod races


def test_the_hung_pod_deleted_during_its_hedge_is_replaced_by_the_hedge_pod_alone() -> None:
    """Hung, it is deleted (delete-pod) while the hedge runs: the hedge pod takes its place,
    the ReplicaSet starts no third pod, and the Deployment returns to its count then."""

    def hedge_then_delete(ctl: Scripted, what: str, now: float, obj: object) -> None:
        if what == "started" and isinstance(obj, Pod) and obj.fate == "init_hang":
            ctl.at(now + 30, "hedge-pod", obj)
            ctl.at(now + 50, "delete-pod", obj)

    ctl, seen = _run(hedge_then_delete)
    result = ctl.result  # type: ignore[attr-defined]
    hung = next(p for w, p in seen if w == "started" and p.fate == "init_hang")
    hedge = next(p for w, p in seen if w == "created" and p.hedge)
    assert hung.removed_by == "remediation" and result.deletions == 1
    assert hedge.ready is not None and hung.slot.ready == hedge.ready
    assert result.cold_starts == 3  # two replicas and the hedge pod: no replacement besides
    assert ctl.replicas.count(3) == 2 and ctl.replicas[-1] == 2  # surged; its pod races
    assert result.hedge_gpu_seconds > 0


def test_a_hedge_of_a_ready_pod_or_a_second_hedge_changes_nothing() -> None:
    def hedge_twice_and_late(ctl: Scripted, what: str, now: float, obj: object) -> None:
        if what == "started" and isinstance(obj, Pod) and obj.fate == "init_hang":
            ctl.at(now + 30, "hedge-pod", obj)
            ctl.at(now + 31, "hedge-pod", obj)  # the step finds the annotation: no surge
        if what == "ready" and isinstance(obj, Pod) and not obj.hedge:
            ctl.at(now + 1, "hedge-pod", obj)  # Ready: the step spares it

    ctl, _ = _run(hedge_twice_and_late)
    result = ctl.result  # type: ignore[attr-defined]
    assert result.hedges == 1 and ctl.replicas.count(3) == 2  # surged; its pod races
    assert result.actions["hedge-pod"] >= 3  # all carried out; only one surged


def test_default_unhedged_is_the_core_with_hedging_off() -> None:
    spec = next(s for s in builtin_policies(unhedged=True) if s.name == "default-unhedged")
    rules = spec.make().session.policy.rules  # type: ignore[attr-defined]
    assert not rules.stuck_pod.hedge.enabled and rules.stuck_pod.progress.enabled
    assert PolicyFile().rules.stuck_pod.hedge.enabled  # on by default (by simulation)
    assert PolicyFile().rules.stuck_pod.progress.enabled and PolicyFile().rules.engine_logs.follow
    assert without_hedging(PolicyFile()).guardrails == PolicyFile().guardrails


def test_two_stalled_pods_of_a_deployment_are_hedged_at_once_each_by_one() -> None:
    """Both first pods hang and are hedged at once, as their workflows run (one mutex per
    pod): the Deployment is surged by one for each, the annotation holds both hedges, each
    new pod races one hung pod, and the Deployment returns to its count as each ends."""
    ctl, seen = _run(_hedge_the_hung_pod, replace(SCENARIO, faults=Faults(hang_first=2)))
    result = ctl.result  # type: ignore[attr-defined]
    hung = [p for w, p in seen if w == "started" and p.fate == "init_hang"]
    assert len(hung) == 2 and result.hedges == 2
    assert max(r or 0 for r in ctl.replicas) == 4 and ctl.replicas[-1] == 2
    both = next(h for h in ctl.hedges if len(h) == 2)
    assert {h.uid for h in both} == {p.uid for p in hung}
    assert {h.replicas for h in both} == {2}  # the count both return to
    hedge_pods = [p for w, p in seen if w == "created" and p.hedge]
    assert sorted(id(p.slot) for p in hedge_pods) == sorted(id(p.slot) for p in hung)
    racing = {(h.uid, h.racing) for hs in ctl.hedges for h in hs if h.racing}
    # each hung pod raced by the new pod of its own replica
    assert racing == {(p.uid, q.uid) for p in hung for q in hedge_pods if q.slot is p.slot}
    assert all(p.removed_by == "hedge" and p.slot.ready is not None for p in hung)
    assert ctl.hedges[-1] == ()
