"""`remediator demo`: the core the service runs, fed by the fleet simulator in accelerated
time, in one process, with a live terminal view (rich) of pods by phase, incidents, the
actions taken and held, and the Slack messages the service would send. No cluster, no
network: the simulator is the cluster, and its workflows act at once.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from remediator.contract.decision import Decision, Suppressed
from remediator.executors.argo_params import template_for
from remediator.executors.protocol import Submitted
from remediator.executors.slack import act_blocks
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.cluster import Pod
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.scenario import (
    DeploymentSpec,
    Faults,
    ScaleLoad,
    Scenario,
    load_scenario,
)
from remediator.sim.fleet.simulation import Simulation
from remediator.sim.plan import BASE_TIME
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


def slack_text(d: Decision) -> str:
    """The Slack message the notifier would post, as plain text (header, fields, why)."""
    submitted = None
    if d.action != "notify":
        template = template_for(d)
        name = f"{template}-{d.incident[-5:]}"
        submitted = Submitted(name, "argo", template, d.incident, True,
                              f"https://argo.example/workflows/argo/{name}")  # fmt: skip
    blocks = act_blocks(d, submitted)
    lines = [blocks[0]["text"]["text"]]
    for f in blocks[1]["fields"]:
        lines.append(f["text"].replace("\n", ": ", 1))
    lines.append(blocks[2]["text"]["text"].replace("\n", ": ", 1))
    return "\n".join(lines)


@dataclass
class View:
    """What the live view shows, updated from the simulation's observer."""

    phases: dict[str, Counter[str]] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    events: deque[str] = field(default_factory=lambda: deque(maxlen=12))
    slack: deque[str] = field(default_factory=lambda: deque(maxlen=3))
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
            self.slack.append(f"[{stamp}] " + slack_text(obj))

    def suppressed(self, s: Suppressed) -> None:
        stamp = f"{int(s.decision.at - BASE_TIME) // 60:3d}"
        self.held.append(f"{stamp}m {s.guardrail}: {s.reason[:110]}")

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
        Panel("\n\n".join(view.slack) or "-", title="Slack (would send)"),
    )


class _Sink(CorePolicy):
    """The core, with held decisions shown as they happen."""

    def __init__(self, view: View) -> None:
        super().__init__("default", PolicyFile(), keep_suppressed=True)
        self.view = view

    def take(self) -> list[Decision]:
        for s in self.sink.held_items:
            self.view.suppressed(s)
        self.sink.held_items.clear()
        return super().take()


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

    sim = Simulation(scenario, seed, _Sink(view), observer=observe)
    if plain:
        result = sim.run()
    else:
        from rich.live import Live

        with Live(render(view), refresh_per_second=8) as live:
            result = sim.run()
            live.update(render(view))
    print(
        f"\n{result.cold_starts} cold starts, {result.deletions} pods deleted "
        f"({result.false_kills} would have come up), {len(result.ready_s)} replicas served, "
        f"P99 time to Ready {sorted(result.ready_s)[int(0.99 * (len(result.ready_s) - 1))]:.0f}s"
        if result.ready_s
        else "no replicas"
    )
