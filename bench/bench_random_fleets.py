"""The default policy against the seed rule on random fleets: what held-out fleets will do.

    .venv/bin/python bench/bench_random_fleets.py                  # 40 fleets, 3 h each
    .venv/bin/python bench/bench_random_fleets.py --fleets 200 --first 100
    .venv/bin/python bench/bench_random_fleets.py --policy my-policy.yaml

Each fleet is drawn from its number (the same number, the same fleet, on any machine): a
profile (tuned or untuned), one to eight Deployments of models of TP 1 to 8, spare GPUs or
GPUs for the peak and no more, node scoring spread or pack, a scale-up load, rollouts, and
faults (engine-init hangs 0-20%, a slow or failing registry, driver hangs, unsettled GPU
nodes where there are eight or more, healthy GPU nodes whose engine inits take 1.5-3 times
as long). Prints every fleet where the default's P99 time to Ready is above the seed
rule's, or it killed a healthy pod (a false kill) or looped, or its hedges took more than
5% of the cold starts' GPU-minutes (`hedge_budget`'s bound, issue 20), then how many of
each (false kills over the goal, and any at all) and the largest hedge share; never fails.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from remediator.policy_file import PolicyFile, load_policy_file
from remediator.sim.fleet.compare import PolicySpec, compare
from remediator.sim.fleet.controllers import CorePolicy, SeedRule
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario, no_spare

sys.path.insert(0, str(Path(__file__).parent))
from bench_sim import MAX_FALSE_KILL_PCT, MAX_HEDGE_PCT  # noqa: E402

# Models the simulator knows, by the TP they serve at (sim/fleet: their weights and steps).
MODELS = (
    ("meta-llama/Llama-3.1-8B-Instruct", 1),
    ("example/small-7B", 1),
    ("meta-llama/Llama-3.1-70B-Instruct", 2),
    ("Qwen/Qwen2.5-72B-Instruct", 2),
    ("mistralai/Mixtral-8x22B-Instruct-v0.1", 4),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", 8),
)


def fleet(number: int, hours: float) -> Scenario:
    """Fleet `number`, drawn from its own random stream."""
    rng = random.Random(number)
    deps = []
    for i in range(rng.randint(1, 8)):
        model, tp = rng.choice(MODELS)
        deps.append(DeploymentSpec(f"vllm-{i}", f"{model}", rng.randint(1, 12), tp=tp))
    gpus = sum(d.replicas * d.tp for d in deps)
    nodes = max(2, -(-int(gpus * rng.uniform(1.1, 2.0)) // 8))
    faults = Faults(
        engine_init_hang=rng.choice((0.0, 0.01, 0.05, 0.2)),
        registry_slow=rng.choice((1.0, 1.0, 3.0)),
        registry_fail=rng.choice((0.0, 0.0, 0.02)),
        driver_hang=rng.choice((0.0, 0.0, 0.03)),
        # (two of eight nodes or more: in a smaller fleet nothing is served under any policy,
        # and the P99 says only when the run ended)
        unsettled_gpu_nodes=rng.choice((0, 0, 0, 2)) if nodes >= 8 else rng.choice((0,)),
    )
    scenario = Scenario(
        name=f"random-{number}",
        profile=rng.choice(("tuned", "untuned")),
        duration_s=hours * 3600,
        seeds=(number,),
        node_count=nodes,
        gpus_per_node=8,
        deployments=tuple(deps),
        scale=ScaleLoad(rng.choice((900.0, 1800.0, 3600.0)), 1, rng.randint(2, 4))
        if rng.random() < 0.7
        else None,
        rollout_every_s=rng.choice((None, 3600.0, 7200.0)),
        faults=faults,
        node_scoring=rng.choice(("spread", "pack")),
    )
    scenario = no_spare(scenario) if rng.random() < 0.5 else scenario
    # Slow GPU nodes, drawn last so that each fleet's other draws are what they were before
    # they were: healthy pods whose engine init takes 1.5-3 times as long there.
    slow = rng.choice((0, 0, 1, 2)) if scenario.node_count >= 4 else 0
    return scenario.with_faults(slow_gpu_nodes=slow, slow_gpu_factor=rng.choice((1.5, 2.0, 3.0)))


def describe(sc: Scenario) -> str:
    models = ",".join(f"{d.replicas}xTP{d.tp}" for d in sc.deployments)
    f = sc.faults
    return (
        f"{sc.profile} {sc.node_count}n {sc.node_scoring} [{models}] hangs {f.engine_init_hang:.0%}"
        f" slow {f.registry_slow:g} fail {f.registry_fail:g} driver {f.driver_hang:g} "
        f"unsettled {f.unsettled_gpu_nodes} slow {f.slow_gpu_nodes}×{f.slow_gpu_factor:g}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fleets", type=int, default=40, help="how many fleets (default 40)")
    parser.add_argument("--first", type=int, default=1, help="the first fleet's number")
    parser.add_argument("--hours", type=float, default=3.0, help="virtual hours per fleet")
    parser.add_argument("--policy", help="judge this policy file instead of the default")
    args = parser.parse_args()
    config = load_policy_file(args.policy) if args.policy else PolicyFile()
    policies = [
        PolicySpec("seed-rule", lambda: SeedRule("seed-rule")),
        PolicySpec("default", lambda: CorePolicy("default", config)),
    ]
    above = unsafe = any_kill = over_budget = 0
    most_hedged = (0.0, 0)  # (the largest hedge share, its fleet)
    for number in range(args.first, args.first + args.fleets):
        sc = fleet(number, args.hours)
        by = {s.policy: s for s in compare(sc, policies)[0]}
        d, seed = by["default"], by["seed-rule"]
        dp, sp = d.ready["p99"], seed.ready["p99"]
        worse = dp > sp
        killed = d.false_kill_pct > (MAX_FALSE_KILL_PCT if sc.faults.engine_init_hang else 0.0)
        above += worse
        unsafe += killed or d.kill_loops > 0
        any_kill += d.false_kill_pct > 0  # under the goal, still a healthy pod deleted
        share = 100 * d.hedge_gpu_minutes / d.gpu_minutes if d.gpu_minutes else 0.0
        over_budget += share > MAX_HEDGE_PCT
        most_hedged = max(most_hedged, (share, number))
        if worse or d.false_kill_pct > 0 or d.kill_loops or share > MAX_HEDGE_PCT:
            print(f"fleet {number}: default P99 {dp:.0f}s, seed rule {sp:.0f}s; false kills "
                  f"{d.false_kill_pct:.2f}%, kill loops {d.kill_loops}; hedges "
                  f"{share:.1f}% of GPU-min; {describe(sc)}")  # fmt: skip
    print(f"{args.fleets} fleets ({args.first}..{args.first + args.fleets - 1}, "
          f"{args.hours:g} h each): default above the seed rule's P99 in {above}; "
          f"false kills over the goal or kill loops in {unsafe}; "
          f"a healthy pod deleted at all in {any_kill}; hedges over {MAX_HEDGE_PCT:g}% of "
          f"cold-start GPU-minutes in {over_budget} (the most {most_hedged[0]:.1f}%, "
          f"fleet {most_hedged[1]})")  # fmt: skip


if __name__ == "__main__":
    main()
