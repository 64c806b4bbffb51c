"""`remediator demo`: the embedded runtime (Driver, Outbox, Acting) fed by the fleet
simulator in accelerated time, in one process, with a live terminal view (rich) of pods by
phase, incidents, the actions taken and held, and the Slack messages the worker posts (act
messages and their thread replies). No cluster, no network: the simulator is the cluster,
Argo and Slack (`runtime_controller.py`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from remediator.contract.decision import Decision
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.kube import BASE_TIME
from remediator.sim.fleet.runtime_controller import Post, RuntimePolicy
from remediator.sim.fleet.scenario import (
    DeploymentSpec,
    Faults,
    ScaleLoad,
    Scenario,
    load_scenario,
)
from remediator.sim.fleet.simulation import Simulation
from remediator.timeline.model import UNFINISHED

DEMO = Scenario(
    name="demo", profile="tuned", duration_s=3600, seeds=(1,), node_count=8, gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),
                 DeploymentSpec("vllm-qwen-72b", "Qwen/Qwen2.5-72B-Instruct", 4)),
    scale=ScaleLoad(300, 4, 12), rollout_every_s=1200,
    faults=Faults(engine_init_hang=0.08, driver_hang=0.02, registry_fail=0.05,
                  unsettled_gpu_nodes=1),
)  # fmt: skip
PHASES = (*UNFINISHED, "ready")


@dataclass
class View:
    """What the live view shows, updated from the simulation's observer."""

    phases: dict[str, Counter[str]] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    events: deque[str] = field(default_factory=lambda: deque(maxlen=12))
    slack: deque[str] = field(default_factory=lambda: deque(maxlen=4))
    held: deque[str] = field(default_factory=lambda: deque(maxlen=5))
    actions: Counter[str] = field(default_factory=Counter)
    now: float = 0.0

    def observe(self, what: str, now: float, obj: object) -> None:
        self.now = now
        stamp = f"{int(now) // 60:3d}:{int(now) % 60:02d}"
        if isinstance(obj, Pod):
            if obj.alive:
                self.pods[obj.uid] = obj
            else:
                self.pods.pop(obj.uid, None)
                if obj.removed_by == "remediation":
                    self.events.append(f"{stamp} deleted {obj.name} ({obj.fate})")
        elif isinstance(obj, Decision):
            self.actions[obj.action] += 1
            target = f"{obj.namespace}/{obj.target}" if obj.namespace else obj.target
            self.events.append(f"{stamp} {obj.action} {target}")

    def post(self, post: Post) -> str:
        """A message the worker posted to (simulated) Slack, a thread reply under its
        message; returns its first line, stamped."""
        t = int(post.at - BASE_TIME)
        text = ("  ↳ " if post.thread else "") + post.text
        self.slack.append(f"[{t // 60:3d}:{t % 60:02d}] {text}")
        return f"{t // 60:3d}:{t % 60:02d} slack: {text.splitlines()[0]}"

    def suppressed(self, guardrail: str, reason: str) -> None:
        self.held.append(f"{int(self.now) // 60:3d}m {guardrail}: {reason[:110]}")

    def by_phase(self) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {}
        for p in self.pods.values():
            out.setdefault(p.dep.spec.name, Counter())[_phase(p)] += 1
        return out


def _phase(p: Pod) -> str:
    if p.ready is not None:
        return "ready"
    if p.started is not None:
        return "engine_init"
    if p.scheduled is None:
        return "scheduling"
    if p.pull_start is not None and p.pulled is None:
        return "image_pull"
    return "container_start"


def render(view: View) -> Any:
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table

    table = Table(title=f"pods by phase · t+{int(view.now) // 60}m{int(view.now) % 60:02d}s",
                  expand=True)  # fmt: skip
    table.add_column("deployment")
    for ph in PHASES:
        table.add_column(ph, justify="right")
    for dep, counts in sorted(view.by_phase().items()):
        table.add_row(dep, *(str(counts.get(ph, 0) or "") for ph in PHASES))
    acts = ", ".join(f"{k} {v}" for k, v in sorted(view.actions.items())) or "none yet"
    return Group(
        table,
        Panel("\n".join(view.events) or "-", title=f"incidents and actions ({acts})"),
        Panel("\n".join(view.held) or "-", title="held by guardrails"),
        Panel("\n\n".join(view.slack) or "-", title="Slack (posted by the outbox worker)"),
    )


class _Held(logging.Handler):
    """The runtime's own `suppressed` log lines (what a guardrail held, and why), shown."""

    def __init__(self, view: View) -> None:
        super().__init__(logging.INFO)
        self.view = view

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "suppressed":
            fields = vars(record)
            self.view.suppressed(str(fields.get("guardrail")), str(fields.get("reason")))


def run_demo(
    scenario_file: str | None, *, speed: float, seconds: float, seed: int, plain: bool
) -> None:
    scenario = load_scenario(scenario_file) if scenario_file else DEMO
    from dataclasses import replace

    scenario = replace(scenario, duration_s=seconds)
    view = View()
    started = time.monotonic()
    live: Any = None
    shown = [0.0]

    def observe(what: str, now: float, obj: object) -> None:
        view.observe(what, now, obj)
        if plain and isinstance(obj, Decision):
            print(view.events[-1], flush=True)
        if now - shown[0] < 1.0:
            return
        shown[0] = now
        ahead = now / speed - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)  # accelerated, not instant: virtual time paced to the wall
        if live is not None:
            live.update(render(view))

    def posted(post: Post) -> None:
        line = view.post(post)
        if plain:
            print(line, flush=True)

    runtime = RuntimePolicy("default", PolicyFile(), show=posted)
    logger = logging.getLogger("remediator.runtime")
    held, level = _Held(view), logger.level
    logger.addHandler(held)
    logger.setLevel(logging.INFO)
    try:
        sim = Simulation(scenario, seed, runtime, observer=observe)
        if plain:
            result = sim.run()
        else:
            from rich.live import Live

            with Live(render(view), refresh_per_second=8) as live:
                result = sim.run()
                live.update(render(view))
        rows = runtime.outbox.counts()
    finally:
        logger.removeHandler(held)
        logger.setLevel(level)
        runtime.close()
    print(
        f"\n{result.cold_starts} cold starts, {result.deletions} pods deleted "
        f"({result.false_kills} would have come up), {len(result.ready_s)} replicas served, "
        f"P99 time to Ready {sorted(result.ready_s)[int(0.99 * (len(result.ready_s) - 1))]:.0f}s"
        if result.ready_s
        else "no replicas"
    )
    print("outbox rows: " + (", ".join(f"{k} {v}" for k, v in sorted(rows.items())) or "none"))
