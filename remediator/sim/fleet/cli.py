"""`remediator simulate` and `remediator demo`."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click
import orjson

from remediator.contract.errors import ConfigError
from remediator.sim.fleet.scenario import ScenarioError, load_scenario


@click.command("simulate")
@click.argument("scenario_file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A policy file to compare beside none, seed-rule and default (repeatable).",
)
@click.option("--seeds", help="Comma-separated seeds, instead of the scenario's.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="sim-out",
    show_default=True,
    help="Where summary.json and the PNG plots are written.",
)
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--unhedged",
    is_flag=True,
    help="Also run default-unhedged: the default with hedged starts off (stuck_pod.hedge: on "
    "by default, a stalled pod's Deployment is surged by one), to see what hedging gains.",
)
@click.option(
    "--record",
    is_flag=True,
    help="Write each run's stream as a replay file (remediator replay FILE) in --out.",
)
@click.option(
    "--tail",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="Tell the N slowest replicas of each policy that runs the core, pod by pod: when "
    "each was scheduled, pulled, started and had its log read, where the simulator hung it, "
    "what the core decided, what a guardrail held, and when each pod ended.",
)
@click.option(
    "--wire",
    type=click.Choice(["records", "json"]),
    default="records",
    show_default=True,
    help="json: render every object as the API server's JSON and feed the core "
    "through its own decoder (slower; the same inputs).",
)
def simulate(scenario_file: str, policies: tuple[str, ...], seeds: str | None, out_dir: str,
             output: str, unhedged: bool, record: bool, tail: int, wire: str) -> None:  # fmt: skip
    """Simulate a GPU fleet in virtual time and compare remediation policies on it.

    \b
    Every policy runs on the same seeds (the same pods hang, the same pulls are slow):
      none        no remediation
      seed-rule   engine init > 60 s on 3 checks -> delete (app=vllm-inference), no guards
      default     remediator's default policy, through the real core and guardrails
      FILE        each --policy file

    \b
    Prints per policy: time to Ready and to first token per requested replica
    (P50/P95/P99/max, P99-P50), false kills (pods deleted that would have become Ready),
    kill loops, GPU-minutes spent in cold starts, actions and guardrail holds.
    Writes OUT/summary.json, OUT/ready-cdf.png and OUT/swimlane.png (with matplotlib:
    pip install 'remediator[sim]').

    \b
    The scenario file says the nodes (count, GPUs each, and how kube-scheduler scores a
    node's free GPUs: spread, its default, or pack, MostAllocated on nvidia.com/gpu), the
    Deployments (model, replicas, tp), the load and the faults: examples/sim/*.yaml,
    docs/simulation.md.

    \b
      remediator simulate examples/sim/tuned.yaml
      remediator simulate examples/sim/untuned.yaml --policy my-policy.yaml --unhedged
      remediator simulate examples/sim/untuned.yaml --seeds 1 --tail 5   # why the tail is slow
    """
    from remediator.sim.fleet import plots
    from remediator.sim.fleet.compare import builtin_policies, compare, slowest, table
    from remediator.sim.fleet.tail import render

    try:
        scenario = load_scenario(scenario_file)
    except ScenarioError as exc:
        raise click.UsageError(f"scenario {scenario_file}: {exc}") from None
    if seeds:
        try:
            scenario = replace(scenario, seeds=tuple(int(s) for s in seeds.split(",")))
        except ValueError:
            raise click.BadParameter("expected whole numbers", param_hint="--seeds") from None
    try:
        specs = builtin_policies(policies, unhedged=unhedged)
    except ConfigError as exc:
        raise click.UsageError(f"policy file: {exc}") from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summaries, runs = compare(scenario, specs, record_dir=out if record else None,
                              wire_json=wire == "json", tail=tail)  # fmt: skip
    (out / "summary.json").write_bytes(
        orjson.dumps([s.to_json() for s in summaries], option=orjson.OPT_INDENT_2)
    )
    written = [out / "summary.json"]
    if plots.available():
        title = f"{scenario.name}: seeds {', '.join(map(str, scenario.seeds))}"
        written.append(plots.ready_cdf(runs, out / "ready-cdf.png", title))
        lanes = plots.incident_lanes(runs.get("default", []))
        if lanes:
            title = f"{scenario.name}, default policy: one replica"
            written.append(plots.swimlane(lanes, out / "swimlane.png", title))
    told = {s.policy: slowest(runs[s.policy], tail) for s in summaries}
    if output == "json":
        for s in summaries:
            doc = s.to_json()
            if told[s.policy]:
                doc["tail"] = [r.to_json() for r in told[s.policy]]
            sys.stdout.write(orjson.dumps(doc).decode() + "\n")
        return
    click.echo(f"scenario {scenario.name} ({scenario.profile}), {len(scenario.seeds)} seed(s), "
               f"{scenario.duration_s:.0f} s each")  # fmt: skip
    click.echo(table(summaries))
    for s in summaries:
        if told[s.policy]:
            click.echo("\n" + render(s.policy, told[s.policy], s.replicas, s.ready["p99"]))
    if not plots.available():
        click.echo("(no plots: pip install 'remediator[sim]' for matplotlib)")
    click.echo("wrote " + ", ".join(str(p) for p in written))


@click.command("demo")
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A scenario file; a small built-in fleet with faults when absent.",
)
@click.option(
    "--speed", type=float, default=60.0, show_default=True, help="Virtual seconds per wall second."
)
@click.option(
    "--seconds", type=float, default=1800.0, show_default=True, help="Virtual seconds to run."
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--plain", is_flag=True, help="Print events as lines instead of a live view.")
def demo(scenario_file: str | None, speed: float, seconds: float, seed: int, plain: bool) -> None:
    """Watch remediator run a simulated GPU fleet: no cluster, no network.

    The simulator (accelerated virtual time) feeds the embedded runtime the service runs
    (driver, outbox, outbox worker) and plays its Argo and Slack; the live view shows pods
    by phase, incidents, the actions taken and held, and the Slack messages the worker
    posts (each act message and its thread reply when the workflow ends).
    """
    from remediator.sim.fleet.demo import run_demo

    run_demo(scenario_file, speed=speed, seconds=seconds, seed=seed, plain=plain)
