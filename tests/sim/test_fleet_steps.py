"""Step-level hangs in the fleet simulator: a hung engine's log shows the steps before the one
it hangs in, and the real core, following the logs, finds it by that step before its phase
budget would have (one hung in NCCL init, by the stretch before its first step line: its
banner is all it logs)."""

from __future__ import annotations

from remediator.contract.decision import Decision
from remediator.inputs.records import Input, PodSeen
from remediator.policy.history import budget
from remediator.policy_file import PolicyFile, load_policy
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.controllers import CorePolicy, NoRemediation
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from remediator.sim.fleet.simulation import Simulation
from remediator.sim.fleet.steps import LOGGED

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
FLEET = Scenario(
    name="step-hangs", profile="tuned", duration_s=2 * 3600, seeds=(3,), node_count=8,
    gpus_per_node=8, scale=ScaleLoad(600, 4, 16), faults=Faults(engine_init_hang=0.2),
    deployments=(DeploymentSpec("vllm-llama-70b", MODEL, 8),),
)  # fmt: skip
# Guardrails wide open: every hung pod is decided on when the core finds it (min_age, which
# waits for the model's expected cold start, off), so each step's hangs show.
PROGRESS = """
stuck_pod:
  progress: {enabled: true, floor_s: 15}
engine_logs: {follow: true, max_pods: 64}
guardrails:
  min_age: {factor: 0}
  cooldown: {seconds: 0}
  blast_radius: {max_pods: 1000, max_percent: 100, max_pods_cluster: 1000}
  rate_limit: {per_minute: 1000, burst: 1000}
"""


def _run(
    config: PolicyFile, budgets: dict[str, float] | None = None
) -> tuple[dict[str, Pod], dict[str, Decision]]:
    """The pods started and the first decision on each; `budgets`: each decided pod's engine
    init budget (adaptive: what the core's history gave it) when it was decided on."""
    pods: dict[str, Pod] = {}
    decided: dict[str, Decision] = {}
    ctl = CorePolicy("c", config)
    stuck = config.rules.stuck_pod

    def watch(what: str, now: float, obj: object) -> None:
        if what == "started" and isinstance(obj, Pod):
            pods[obj.uid] = obj
        elif what == "decision" and isinstance(obj, Decision) and obj.uid:
            decided.setdefault(obj.uid, obj)
            if budgets is not None:
                history = ctl.session.engine.history
                budgets.setdefault(obj.uid, budget(stuck, history, MODEL, "engine_init")[0])

    Simulation(FLEET, FLEET.seeds[0], ctl, observer=watch).run()
    return pods, decided


def test_hung_engines_are_found_by_the_step_they_hang_in() -> None:
    config = load_policy(PROGRESS)
    stuck = config.rules.stuck_pod
    budgets: dict[str, float] = {}
    pods, decided = _run(config, budgets)
    by_step: dict[str, int] = {}
    found_early: list[bool] = []
    for uid, pod in pods.items():
        d = decided.get(uid)
        if pod.fate != "init_hang" or d is None or d.action != "delete-pod":
            continue
        assert pod.started is not None and pod.hang_at is not None
        hung_in = LOGGED[len(pod.lines)]
        by_step[hung_in] = by_step.get(hung_in, 0) + 1
        phase_due = pod.started + budgets[uid]
        named = {
            "weights_started": "before vLLM's first step line (NCCL init)",
            "torch_compile": "in vLLM step torch_compile",
            "cuda_graphs": "in vLLM step kv_cache (timed as cuda_graphs)",
        }[hung_in]
        assert f"stalled {named}" in d.reason, d.reason
        early = d.at - BASE_TIME < phase_due + (stuck.checks - 1) * stuck.check_interval_s
        # (a hang late in a short engine init can be due by its step a moment after its phase
        # budget: a step is judged by its siblings alone; one in NCCL init, never)
        assert early or hung_in != "weights_started", d.reason
        found_early.append(early)
    assert set(by_step) == {"weights_started", "torch_compile", "cuda_graphs"}
    assert sum(found_early) >= 0.9 * len(found_early), found_early
    assert all(n >= 3 for n in by_step.values()), by_step


def test_healthy_pods_log_every_step_and_are_never_deleted() -> None:
    pods, decided = _run(load_policy(PROGRESS))
    healthy = [p for p in pods.values() if p.fate == "ok" and not p.node.unsettled]  # type: ignore[union-attr]
    assert len(healthy) > 50
    for pod in healthy:
        assert len(pod.lines) == len(LOGGED)
        assert pod.would_ready is not None and pod.started is not None
        assert pod.started + pod.lines[-1] < pod.would_ready
        d = decided.get(pod.uid)
        assert d is None or d.action != "delete-pod", d


class Counting(CorePolicy):
    """The real core, noting the kinds of input it is fed."""

    def __init__(self, config: PolicyFile) -> None:
        super().__init__("counting", config)
        self.kinds: dict[str, int] = {}

    def feed(self, item: Input) -> None:
        name = type(item).__name__
        self.kinds[name] = self.kinds.get(name, 0) + 1
        super().feed(item)


def test_step_lines_reach_the_core_only_through_its_log_follower() -> None:
    unfollowed = Counting(load_policy("engine_logs: {follow: false}"))
    followed = Counting(load_policy(PROGRESS))
    for ctl in (followed, unfollowed):
        Simulation(FLEET, FLEET.seeds[0], ctl).run()
    assert "EngineStep" not in unfollowed.kinds
    assert followed.kinds["EngineStep"] > 5 * 50


class _Reads(NoRemediation):
    """Decides nothing, follows one log at a time and, with `asks`, asks for every pod's log
    it has seen (as the core asks for a pod's it would judge on its budget alone)."""

    wants_inputs, follows_logs = True, 1

    def __init__(self, asks: bool) -> None:
        super().__init__("reads")
        self.asks, self.seen = asks, dict[str, None]()

    def feed(self, item: Input) -> None:
        if isinstance(item, PodSeen):
            self.seen[item.uid] = None

    def logs_wanted(self) -> list[str]:
        return list(self.seen) if self.asks else []


def _most_followed_at_once(asks: bool) -> int:
    pods: list[Pod] = []
    fleet = Scenario(
        name="one-wave", profile="untuned", duration_s=1800, seeds=(5,), node_count=2,
        gpus_per_node=8, deployments=(DeploymentSpec("vllm-llama-70b", MODEL, 4),),
    )  # fmt: skip
    sim = Simulation(fleet, 5, _Reads(asks), observer=lambda what, now, obj: (
        pods.append(obj) if what == "created" and isinstance(obj, Pod) else None))  # fmt: skip
    sim.run()
    spans = [(p.followed_at, p.ready or sim.end) for p in pods if p.followed_at is not None]
    assert len(pods) == 4 and spans
    return max(sum(1 for a, b in spans if a <= at < b) for at, _ in spans)


def test_a_log_the_controller_asks_for_is_read_beyond_the_bound_and_no_further() -> None:
    """The follower reads the oldest pods in engine init up to its bound (one here); a pod
    the core asks for (`PolicyEngine.logs_wanted`) is read now, up to the bound again beyond
    it, as serve's follower does (remediator/sources/engine_logs.py)."""
    assert _most_followed_at_once(asks=False) == 1
    assert _most_followed_at_once(asks=True) == 2
