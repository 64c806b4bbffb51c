"""Policies compared on the same scenario and the same seeds: a table, JSON, plots."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from remediator.policy_file import PolicyFile, load_policy_file
from remediator.sim.fleet.controllers import Controller, CorePolicy, NoRemediation, SeedRule
from remediator.sim.fleet.results import RunResult, Summary, summarize
from remediator.sim.fleet.scenario import Scenario
from remediator.sim.fleet.simulation import Simulation
from remediator.sim.fleet.tail import ReplicaStory, TailWatch


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A named way to make a fresh controller for each run."""

    name: str
    make: Callable[[], Controller]


def without_hedging(policy: PolicyFile) -> PolicyFile:
    """The policy with hedged starts off (stuck_pod.hedge), all else as it is."""
    rules = policy.rules
    stuck = replace(rules.stuck_pod, hedge=replace(rules.stuck_pod.hedge, enabled=False))
    return replace(policy, rules=replace(rules, stuck_pod=stuck))


def builtin_policies(files: tuple[str, ...] = (), unhedged: bool = False) -> list[PolicySpec]:
    specs = [
        PolicySpec("none", lambda: NoRemediation("none")),
        PolicySpec("seed-rule", lambda: SeedRule("seed-rule")),
        PolicySpec("default", lambda: CorePolicy("default", PolicyFile())),
    ]
    for path in files:
        config = load_policy_file(path)
        name = Path(path).stem
        while name in {s.name for s in specs}:
            name += "*"  # a file named like a built-in policy keeps its own row
        specs.append(PolicySpec(name, lambda n=name, c=config: CorePolicy(n, c)))  # type: ignore[misc]
    if unhedged:
        off = without_hedging(PolicyFile())
        specs.append(PolicySpec("default-unhedged", lambda: CorePolicy("default-unhedged", off)))
    return specs


def run_policy(
    scenario: Scenario,
    spec: PolicySpec,
    *,
    record_dir: Path | None = None,
    wire_json: bool = False,
    tail: int = 0,
) -> list[RunResult]:
    """Each seed's run. `tail`: tell that many of each run's slowest replicas
    (`RunResult.tail`)."""
    runs = []
    for seed in scenario.seeds:
        stream: IO[bytes] | None = None
        if record_dir is not None:
            path = record_dir / f"replay-{scenario.name}-{spec.name}-seed{seed}.jsonl"
            stream = path.open("wb")
        controller = spec.make()
        watch = TailWatch() if tail > 0 else None
        if watch is not None and isinstance(controller, CorePolicy):
            controller.keep_notes()
        try:
            sim = Simulation(scenario, seed, controller, record=stream, wire_json=wire_json,
                             observer=watch)  # fmt: skip
            result = sim.run()
        finally:
            if stream is not None:
                stream.close()
        result.policy = spec.name
        if watch is not None:
            notes = controller.notes if isinstance(controller, CorePolicy) else []
            result.tail = watch.slowest(seed, tail, sim.end, notes)
        runs.append(result)
    return runs


def slowest(runs: list[RunResult], n: int) -> list[ReplicaStory]:
    """The `n` slowest replicas over every seed's run (each run told its own `n`)."""
    return sorted((r for run in runs for r in run.tail), key=lambda r: -r.ready_s)[:n]


def compare(
    scenario: Scenario, specs: list[PolicySpec], **kwargs: object
) -> tuple[list[Summary], dict[str, list[RunResult]]]:
    runs = {spec.name: run_policy(scenario, spec, **kwargs) for spec in specs}  # type: ignore[arg-type]
    return [summarize(r) for r in runs.values()], runs


def _s(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.0f}s"


def table(summaries: list[Summary]) -> str:
    head = ("policy", "replicas", "ready P50", "P95", "P99", "max", "P99-P50", "TTFT P99",
            "false kills", "kill loops", "GPU-min cold", "actions", "held")  # fmt: skip
    rows = [head]
    for s in summaries:
        acts = ", ".join(f"{k} {v}" for k, v in s.actions.items()) or "-"
        if s.hedges:
            acts += f", hedges {s.hedges} ({s.hedge_gpu_minutes:.0f} GPU-min)"
        rows.append((
            s.policy, str(s.replicas), _s(s.ready["p50"]), _s(s.ready["p95"]), _s(s.ready["p99"]),
            _s(s.ready["max"]), _s(s.ready["spread"]), _s(s.first_token["p99"]),
            f"{s.false_kills} ({s.false_kill_pct:.2f}%)", str(s.kill_loops),
            f"{s.gpu_minutes:.0f}", acts, str(s.held),
        ))  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown(summaries: list[Summary]) -> str:
    out = ["| policy | replicas | ready P50 | P95 | P99 | max | P99-P50 | TTFT P99 | false kills "
           "| kill loops | GPU-min in cold starts | actions |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for s in summaries:
        acts = ", ".join(f"{k} {v}" for k, v in s.actions.items()) or "-"
        out.append(
            f"| {s.policy} | {s.replicas} | {_s(s.ready['p50'])} | {_s(s.ready['p95'])} | "
            f"{_s(s.ready['p99'])} | {_s(s.ready['max'])} | {_s(s.ready['spread'])} | "
            f"{_s(s.first_token['p99'])} | {s.false_kills} ({s.false_kill_pct:.2f}%) | "
            f"{s.kill_loops} | {s.gpu_minutes:.0f} | {acts} |"
        )
    return "\n".join(out)
