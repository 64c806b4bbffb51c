"""Choose the stuck-pod defaults by simulation, and write the table that justifies them.

    python -m remediator.sim.fleet.defaults [--write docs/simulation-defaults.md]

The tuned and the untuned fleet (examples/sim), each as given (spare GPUs) and with GPUs
for its peak and no more (`bench/bench_sim.py`'s `no_spare`), run with 0%, 1%, 5% and 20% of
cold starts hanging in engine init (in one of vLLM's steps, `steps.py`). A candidate policy
is admissible when, in every one of those sixteen scenarios, it kills no more than 0.5% of
pods that would have become Ready (none at all where nothing hangs), never deletes one
replica's would-be-Ready pods twice (a kill loop), and its P99 time to Ready is no worse
than the seed rule's; and it deletes a pod hung beside a Ready sibling within budget plus
checks (`properties.py`). Among admissible ones, the best has the lowest geometric mean,
over the scenarios, of P99 time to Ready relative to the same fleet with no hangs and no
remediation (geometric, so that each scenario's relative gain counts the same). The search
is by coordinates from the defaults before it: each knob in turn over its values, keeping
the best.

The blast radius caps are searched too: the simulation cannot value what they protect
against (a faulty policy deleting healthy pods en masse), so a cap moves only as far as the
scenarios need, and the share cap (max_percent) no further than half a workload per window.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from remediator.guard.blast_radius import BlastRadiusConfig
from remediator.guard.cooldown import CooldownConfig
from remediator.guard.hedge_budget import HedgeBudgetConfig
from remediator.guard.min_age import MinAgeConfig
from remediator.guard.rate_limit import RateLimitConfig
from remediator.policy.config import (
    AdaptiveConfig,
    EngineLogsConfig,
    ProgressConfig,
    StuckPodConfig,
)
from remediator.policy_file import PolicyFile
from remediator.sim.fleet import cordons, floors, oracle, warmups, windows
from remediator.sim.fleet.compare import PolicySpec, run_policy
from remediator.sim.fleet.controllers import CorePolicy, NoRemediation, SeedRule
from remediator.sim.fleet.properties import hung_pod_lateness
from remediator.sim.fleet.results import Summary, summarize
from remediator.sim.fleet.scenario import EXAMPLES, Scenario, load_scenario, no_spare

HANG_RATES = (0.0, 0.01, 0.05, 0.20)
MAX_FALSE_KILL_PCT = 0.5
MAX_HEDGE_SHARE = 0.05  # hedges' GPU-minutes, of cold starts' (issue 20)
NOISE = 0.03  # score differences below this are within seed-to-seed noise: keep the default

Knob = tuple[str, tuple[float, ...], Callable[[PolicyFile, float], PolicyFile]]


def _stuck(c: PolicyFile, **kw: object) -> PolicyFile:
    rules = replace(c.rules, stuck_pod=replace(c.rules.stuck_pod, **kw))  # type: ignore[arg-type]
    return replace(c, rules=rules)


def _adaptive(c: PolicyFile, **kw: object) -> PolicyFile:
    return _stuck(c, adaptive=replace(c.rules.stuck_pod.adaptive, **kw))  # type: ignore[arg-type]


def _progress(c: PolicyFile, **kw: object) -> PolicyFile:
    return _stuck(c, progress=replace(c.rules.stuck_pod.progress, **kw))  # type: ignore[arg-type]


def _logs(c: PolicyFile, **kw: object) -> PolicyFile:
    logs = replace(c.rules.engine_logs, **kw)  # type: ignore[arg-type]
    return replace(c, rules=replace(c.rules, engine_logs=logs))


def _progress_on(c: PolicyFile, v: float) -> PolicyFile:
    """Progress-aware detection reads the pods' logs: the follower comes with it."""
    return _logs(_progress(c, enabled=bool(v)), follow=bool(v))


def _hedge(c: PolicyFile, v: float) -> PolicyFile:
    return _stuck(c, hedge=replace(c.rules.stuck_pod.hedge, enabled=bool(v)))


def _hedging(c: PolicyFile, **kw: object) -> PolicyFile:
    """A hedge knob, searched with hedging on: off, it changes nothing and would never be
    seen (`hedge.enabled`, searched after them, may still turn it off)."""
    return _stuck(c, hedge=replace(c.rules.stuck_pod.hedge, enabled=True, **kw))  # type: ignore[arg-type]


def _charge(c: PolicyFile, v: float) -> PolicyFile:
    budget = replace(c.guardrails.of("hedge_budget", HedgeBudgetConfig), charge_cold_starts=v)
    return _guard(_hedging(c), "hedge_budget", budget)


def _rate(c: PolicyFile, **kw: object) -> PolicyFile:
    rate = replace(c.guardrails.of("rate_limit", RateLimitConfig), **kw)  # type: ignore[arg-type]
    return _guard(c, "rate_limit", rate)


def _budget(c: PolicyFile, v: float) -> PolicyFile:
    return _stuck(c, budgets={**c.rules.stuck_pod.budgets, "engine_init": v})


def _guard(c: PolicyFile, stage: str, value: object) -> PolicyFile:
    return replace(c, guardrails=c.guardrails.with_stage(stage, value))


def _min_age(c: PolicyFile, **kw: object) -> PolicyFile:
    return _guard(c, "min_age", replace(c.guardrails.of("min_age", MinAgeConfig), **kw))  # type: ignore[arg-type]


def _blast(c: PolicyFile) -> BlastRadiusConfig:
    return c.guardrails.of("blast_radius", BlastRadiusConfig)


# Two knobs a search by coordinates cannot move: each alone is within noise of the search's
# choice, together they are not (measured with the seeds and hours of the table below; the
# scores again 2026-12-07, against the defaults now, and once more that day when the hedge
# budget was paid by every cold start and settled to what a hedge held).
_PAIR = (
    "min_age.stalled 0 and progress.factor 2 move together: each alone is within seed "
    "noise of the search's choice (min_age.stalled 1, progress.factor 3), and a search by "
    "coordinates moves one knob at a time; together, with the rest of the defaults now, they "
    "score 1.42 against 1.49, beyond noise, with no false kill, and the untuned fleet's 5% "
    "P99 is 926 s against 1,057 s (with spare GPUs; 927 s against 1,040 s without)"
)

# How soon a hedge starts (measured 2026-12-05, once the simulator scaled Deployments
# mid-rollout, again once the hedge budget settled hedges' charges, again once blast_radius
# counted a replica once, 2026-12-06, once no hedge followed vLLM's API server start and a
# first-wave pod was looked at each check, and 2026-12-07, once a Deployment's stalled pods
# were hedged at once, and again when the hedge budget was paid by every cold start and
# settled to what a hedge held): the search takes `hedge.at` 0.75, nearest its start among
# the values within noise of the best. Until 2026-12-07 it also kept hedging off (at 0.75,
# within noise of off); with hedges at once it turns it on by itself.
_HEDGE_AT = (
    "the search takes `hedge.at` 0.75 (1.54: within noise of 0.5's 1.50, and nearer where it "
    "began, 1) and hedging on at it (1.54 against 1.61 off, beyond noise); at 0.5 a hedge "
    "starts ~8 s sooner on the tuned fleet, and the defaults now score 1.42 against 1.44 at "
    "0.75, with no false kill"
)

# Why the blast radius stays at 20 pods and 50%: in fleets of other shapes, more holds
# (measured again 2026-12-07, once a deletion stopped counting when a pod created after it
# was Ready: the search then took 5 pods, within noise of 10 and 20).
_BLAST = (
    "the search's 5 or 10 pods and 25% score within seed noise of 20 and 50% here, and are "
    "admissible only since a stalled replacement's deletion goes on from its pod's "
    "(guard/blast_radius.py); on bench/bench_random_fleets.py's fleets 1-330, 5 pods and 25% "
    "put 10 fleets' P99 above the seed rule's against 4 at 20 and 50% (10 pods and 25%, "
    "before a Ready pod healed a deletion: 29 against 16; a quarter of a workload of up to "
    "seven replicas is one: its hung replicas wait their turn)"
)

# Why a deletion counts one expected cold start: the example fleets' workloads are too large
# for the cap to hold them (measured 2026-12-06, bench/bench_random_fleets.py).
_SPAN = (
    "the example fleets' workloads (19 to 48 replicas) never reach their cap, so every value "
    "scores the same here; in bench/bench_random_fleets.py's fleets 1-1000, a deletion counted "
    "for the whole window put 46 fleets' P99 above the seed rule's (five of them at 732-799 s "
    "against 210-388 s: a workload of two or three replicas held a second replica's hung pod "
    "behind the first's deletion long after that replica was Ready again), 31 counted for one "
    "of the model's expected cold starts, with no false kill or kill loop in any; 2 and 3 cold "
    "starts put fleets 167, 259, 294 and 314 at 269-460 s against 209-310 s at 1"
)

# Why a stretch is judged from three siblings' times: the example fleets have 19 to 48 replicas
# and every stretch has five within minutes (measured 2026-12-06, bench/bench_random_fleets.py).
_FEW = (
    "the example fleets' workloads are large enough that every stretch soon has five "
    "siblings' times, so 3 and 5 score the same here; in bench/bench_random_fleets.py's "
    "fleets 1-10000, where a workload may have one replica, a model's first pods kept "
    "their phase budget (a sibling's whole cold start) until five siblings had timed a "
    "stretch, and 297 fleets' P99 was above the seed rule's at 5 against 212 at 3, with "
    "no healthy pod deleted in any; 2 lost one in fleet 5326 (91 above it in fleets "
    "1-6000, against 107 at 3) and 1 one in fleet 2448 (49 in fleets 1-3000, against 53), "
    "each a compile of an untuned pod 3-3.5 times its siblings' P95 (of 7 and 20)"
)

# Why the rate limit refills 12 a minute: the example fleets' first waves are too small to
# queue (measured 2026-12-07, bench/bench_random_fleets.py).
_RATE = (
    "the example fleets score 6, 12 and 30 the same; in bench/bench_random_fleets.py's fleets "
    "1-1000, a first wave of 50-60 pods with a fifth hung queued its deletions behind 6 a "
    "minute, and 20 fleets' P99 was above the seed rule's at 6 against 16 at 12, with no "
    "healthy pod deleted and no kill loop in any at either"
)

# Where the code's default departs from the search, and why: what the scenarios cannot see.
OVERRIDES: dict[str, tuple[float, str]] = {
    "checks": (
        3,
        "the checks are the only margin left for a per-model budget set close to the "
        "model's real engine init, which these scenarios (adaptive budgets) never meet: "
        "replaying examples/incident-70b.jsonl with its 300 s Llama budget, one or two "
        "checks delete a pod 14 s (or 4 s) before it became Ready, three do not",
    ),
    "min_age.factor": (
        1,
        "min_age is the guardrail between a young pod and a deletion on a budget; the "
        "search's 0.75 once (1.60 against 1.63) was a move at the edge of seed noise, found "
        "once a first-wave pod past its budget was judged by its own pace, and it keeps 1 "
        "since blast_radius counted a replica once, so the guardrail stays where it was",
    ),
    "blast_radius.max_pods": (20, _BLAST),
    "blast_radius.max_percent": (50, _BLAST),
    "blast_radius.cold_starts": (1, _SPAN),
    "min_age.stalled": (0, _PAIR),
    "progress.factor": (2, _PAIR),
    "progress.min_samples": (3, _FEW),
    "hedge.at": (0.5, _HEDGE_AT),
    "rate_limit.per_minute": (12, _RATE),
}
KNOBS: tuple[Knob, ...] = (
    # the guardrails first: at 20% hangs they hold what the policy decides
    ("cooldown.seconds", (0, 10, 30, 60),
     lambda c, v: _guard(c, "cooldown", CooldownConfig(seconds=v))),
    ("blast_radius.max_pods", (5, 10, 20),
     lambda c, v: _guard(c, "blast_radius", replace(_blast(c), max_pods=int(v)))),
    ("blast_radius.max_pods_cluster", (20, 50),
     lambda c, v: _guard(c, "blast_radius",
                         replace(_blast(c), max_pods_cluster=int(v)))),
    ("blast_radius.max_percent", (25, 50),
     lambda c, v: _guard(c, "blast_radius", replace(_blast(c), max_percent=v))),
    ("blast_radius.cold_starts", (0, 1, 2),
     lambda c, v: _guard(c, "blast_radius", replace(_blast(c), cold_starts=v))),
    ("rate_limit.per_minute", (6, 12, 30), lambda c, v: _rate(c, per_minute=v)),
    ("rate_limit.burst", (3, 10), lambda c, v: _rate(c, burst=int(v))),
    ("min_age.factor", (0.5, 0.75, 1.0), lambda c, v: _min_age(c, factor=v)),
    ("min_age.stalled", (0, 1), lambda c, v: _min_age(c, stalled=bool(v))),
    # progress-aware detection (issue 20)
    ("progress.enabled", (0, 1), _progress_on),
    ("progress.floor_s", (5, 10, 15, 30, 60), lambda c, v: _progress(c, floor_s=v)),
    ("progress.factor", (1.5, 2, 3), lambda c, v: _progress(c, factor=v)),
    ("progress.min_samples", (3, 5), lambda c, v: _progress(c, min_samples=int(v))),
    ("engine_logs.max_pods", (8, 64, 256), lambda c, v: _logs(c, max_pods=int(v))),
    # the phase budgets (issue 14's search; tried again around their values)
    ("budgets.engine_init", (45, 60, 90), _budget),
    ("checks", (2, 3), lambda c, v: _stuck(c, checks=int(v))),
    ("adaptive.min_samples", (3, 5), lambda c, v: _adaptive(c, min_samples=int(v))),
    ("adaptive.min_siblings", (1, 3), lambda c, v: _adaptive(c, min_siblings=int(v))),
    ("adaptive.factor", (1.25, 1.5, 2.0), lambda c, v: _adaptive(c, factor=v)),
    ("adaptive.window", (50,), lambda c, v: _adaptive(c, window=int(v))),
    ("expected_cold_start_s", (600,), lambda c, v: _stuck(c, expected_cold_start_s=v)),
    # hedged starts (issue 20), last: every knob above was searched with them off
    ("hedge.at", (0.5, 0.75, 1), lambda c, v: _hedging(c, at=v)),
    ("hedge_budget.charge_cold_starts", (0.5, 1), _charge),
    ("hedge.enabled", (0, 1), _hedge),
)  # fmt: skip


# Notes for the doc's last column, beside what each value scored (`_why`).
WHY: dict[str, str] = {
    "checks": "Kept at 3 whatever the score (below).",
    "adaptive.window": "Issue 14's search; not searched again.",
    "expected_cold_start_s": "Issue 14's search; not searched again.",
    "adaptive.min_siblings": "1 keeps property 1 (a hung pod beside one Ready sibling).",
    "progress.enabled": "Needs the pods' logs: `engine_logs.follow` is on with it (RBAC "
    "`pods/log` get, granted in deploy/).",
    "engine_logs.max_pods": "A scale-up wave's pods in engine init at once; each follow "
    "costs a thread and ~6 ms of CPU per pod (bench_signals).",
    "blast_radius.max_percent": "Searched no higher than half a workload per window.",
    "min_age.stalled": "0: a pod found stalled by its step (progress) is not held until it "
    "is as old as its model's expected cold start; the step's floor and factor and the "
    "checks are its minimum age.",
    "hedge.enabled": "On. Searched last, with `hedge.at` and the charge chosen with hedging "
    "on. (It was kept off while a Kafka worker paid each partition's hedges from its own "
    "cold starts; the guard now hears every partition's, as one process.) At the stall "
    "itself (`hedge.at` 1) a hedge is "
    "only the checks' 20 s ahead of the deletion; at half the stall's limit it starts ~15 s "
    "sooner on the tuned fleet (half its 30 s floor). With the defaults now and hedging on "
    "(several stalled pods of a Deployment hedged at once), against off: the tuned fleet's "
    "P99 with 1% hangs is 62 s against 90 s, with 5% 103 s against 107 s, with 20% 186 s "
    "against 200 s (176 s against 194 s without spare GPUs); the untuned fleet's 1% 640 s against "
    "647 s, 5% 926 s against 938 s (927 s without spare GPUs), 20% 1,191 s against 1,365 s "
    "(1,212 s against 1,397 s without); hedges take at most 3.5% of cold-start GPU-minutes, "
    "and there is no false kill either way (measured 2026-12-07, once the hedge budget was "
    "paid by every cold start and settled to what a hedge held).",
    "hedge.at": "Searched with hedging on. A hedge deletes nothing that is not beaten, so "
    "it may start before the stall; the deletion of a hung pod still waits for the stall "
    "and its checks, and the false kills are those without hedging.",
    "hedge_budget.charge_cold_starts": "Searched with hedging on. 1: a hedge is charged "
    "the most it can cost (its pod's GPUs for a whole cold start) until its stalled pod's "
    "end settles it to what it held; 0.5 gains nothing over noise. 0.25 (not searched) puts "
    "the tuned fleet's 5% P99 at 92-100 s against 103 s (seeds 1-4), but a reservation "
    "below what a hedge holds lets more run at once than the cold starts pay for: in "
    "bench/bench_random_fleets.py's fleets 1-400, hedges took up to 6.4% of cold-start "
    "GPU-minutes (fleet 332; 5 fleets over 5%) against at most 3.8% at 1 (measured "
    "2026-12-07).",
}


GOALS_NOTE = (
    "Issue 20 asks, with 5% hangs, for a P99 time to Ready within 1.25x the hang-free P99 "
    "where the fleet has spare GPUs and 1.6x where it has none. The defaults are at about "
    "1.9x on the tuned fleet and 1.5x on the untuned one in the table below (2 seeds of "
    "4 h; bench/bench_sim.py's 3 seeds of 6 h: 2.1x and 1.5x, the untuned within 1.6x "
    "without spare GPUs), below the seed rule's in every scenario, with no false kill and "
    "no kill loop. "
    "Progress-aware detection now sees every hang the simulator models: a pod hung in NCCL "
    "init logs vLLM's banner and no step line, and the stretch from its container's start to "
    "its first step line is judged like any step. What sets the P99 now: with 5% of cold "
    "starts hung, the P99 replica is a hung one, served by a replacement cold start after "
    "the hang is found. On the tuned fleet that is ~4 s to the container's start, the "
    "stretch's limit (the 30 s floor, or twice the siblings' P95: ~25 s for torch.compile "
    "and graph capture), the checks' 20 s, ~5 s for the delete, then a whole cold start "
    "(~30 s, P50): ~90-115 s against a 64 s goal. A hang found the instant it began leaves "
    "the replacement's own cold start plus the time before it, 1.14x (the oracle section "
    "below): 1.25x needs every hang found within ~5 s of its start, which a step's silence "
    "cannot tell from a slow step's, and a hedge, which starts at half the "
    "stall's limit (`hedge.at`), gains that half and the checks' 20 s at most, and only "
    "where the hedge budget lets it through (the `hedge.enabled` row). On the untuned fleet the "
    "largest part was min_age, which held every hung pod until it was as old as its model's "
    "expected cold start (~650 s) whatever its step said (`min_age.stalled`), then the "
    "limits, three times the siblings' P95 of a step whose time varies as the whole phase "
    "does (`progress.factor` 2 now)."
)


def begin(first: PolicyFile) -> PolicyFile:
    """Where the search starts (see BEGIN_NOTE)."""
    c = _logs(_progress(_progress_on(first, 1), floor_s=15.0), max_pods=64)
    c = _guard(c, "cooldown", CooldownConfig(seconds=0.0))
    c = _rate(c, per_minute=30.0, burst=10)
    blast = BlastRadiusConfig(max_pods=20, max_percent=50.0, max_pods_cluster=50, cold_starts=0)
    return _guard(c, "blast_radius", blast)


BEGIN_NOTE = (
    "the defaults before, with progress-aware detection on (its log follower too, 64 pods "
    "at once) at a 15 s floor, and the deletion caps opened together (no cooldown, blast "
    "radius 20 pods, 50% of a workload and 50 in the cluster per 10 minutes, 30 deletions a "
    "minute with a burst of 10). Off, progress's floor and factor change nothing and would "
    "never be seen; and with 20% of cold starts hung the caps hold what the policy decides "
    "only together: opening one at a time gains nothing (every cap but one still holds), "
    "so a search by coordinates from the caps before never leaves them. From here each "
    "goes back as far as the scenarios allow; off is searched like any other value."
)


def previous_defaults() -> PolicyFile:
    """The defaults before this search (issue 20: those issue 14's search chose), where it
    starts so the table shows why, every knob written out."""
    c = PolicyFile()
    c = _stuck(c, checks=3, expected_cold_start_s=600.0,
               budgets={**c.rules.stuck_pod.budgets, "engine_init": 60.0})  # fmt: skip
    progress = ProgressConfig(
        enabled=False, factor=3.0, quantile=0.95, floor_s=120.0, min_samples=5
    )
    c = _stuck(c, adaptive=AdaptiveConfig(True, 1.5, 5, 1, 50), progress=progress)
    c = _stuck(c, hedge=replace(c.rules.stuck_pod.hedge, enabled=False, at=1.0))
    c = replace(c, rules=replace(c.rules, engine_logs=EngineLogsConfig(follow=False, max_pods=8)))
    c = _guard(c, "min_age", MinAgeConfig(factor=1.0, stalled=True))
    c = _guard(c, "cooldown", CooldownConfig(seconds=30.0))
    c = _guard(c, "rate_limit", RateLimitConfig(per_minute=6.0, burst=3))
    blast = BlastRadiusConfig(max_pods=5, max_percent=25.0, max_pods_cluster=20, cold_starts=0)
    return _guard(c, "blast_radius", blast)


def knob_values(c: PolicyFile) -> dict[str, float]:
    s: StuckPodConfig = c.rules.stuck_pod
    a: AdaptiveConfig = s.adaptive
    return {
        "budgets.engine_init": s.budgets["engine_init"],
        "checks": s.checks,
        "adaptive.min_samples": a.min_samples,
        "adaptive.min_siblings": a.min_siblings,
        "adaptive.factor": a.factor,
        "adaptive.window": a.window,
        "expected_cold_start_s": s.expected_cold_start_s,
        "min_age.factor": c.guardrails.of("min_age", MinAgeConfig).factor,
        "min_age.stalled": float(c.guardrails.of("min_age", MinAgeConfig).stalled),
        "cooldown.seconds": c.guardrails.of("cooldown", CooldownConfig).seconds,
        "blast_radius.max_pods": _blast(c).max_pods,
        "blast_radius.max_pods_cluster": _blast(c).max_pods_cluster,
        "blast_radius.max_percent": _blast(c).max_percent,
        "blast_radius.cold_starts": _blast(c).cold_starts,
        "rate_limit.per_minute": c.guardrails.of("rate_limit", RateLimitConfig).per_minute,
        "rate_limit.burst": c.guardrails.of("rate_limit", RateLimitConfig).burst,
        "progress.enabled": float(s.progress.enabled and c.rules.engine_logs.follow),
        "progress.floor_s": s.progress.floor_s,
        "progress.factor": s.progress.factor,
        "progress.min_samples": s.progress.min_samples,
        "engine_logs.max_pods": c.rules.engine_logs.max_pods,
        "hedge.enabled": float(s.hedge.enabled and s.progress.enabled),
        "hedge.at": s.hedge.at,
        "hedge_budget.charge_cold_starts": c.guardrails.of(
            "hedge_budget", HedgeBudgetConfig
        ).charge_cold_starts,
    }


@dataclass
class Evaluation:
    config: PolicyFile
    summaries: dict[str, Summary]
    score: float  # geometric mean of P99 ratios to the hang-free, remediation-free fleet
    admissible: bool
    late_s: float | None  # property 1: decided this long after budget + checks ran out
    faults: list[str]  # why it is not admissible


# Knobs added after evaluations were stored, and the value that ran before they existed.
ADDED_OFF: dict[str, float] = {
    "hedge.enabled": 0.0,
    "min_age.stalled": 1.0,
    "hedge.at": 1.0,
    "hedge_budget.charge_cold_starts": 1.0,
    "blast_radius.cold_starts": 0.0,
}


def _summary(doc: dict[str, Any]) -> Summary:
    fields = {k: v for k, v in doc.items() if k != "kind"}
    for name in Summary.__dataclass_fields__:
        fields.setdefault(name, 0.0)  # a field added since: hedges' GPU-minutes, none then
    return Summary(**fields)


class Sweep:
    def __init__(
        self, bases: list[Scenario], out: Callable[[str], None] = print, store: Path | None = None
    ) -> None:
        self.scenarios = [
            replace(base.with_faults(engine_init_hang=rate), name=f"{base.name} {rate:.0%}")
            for base in bases
            for rate in HANG_RATES
        ]
        self.out = out
        self.seeds, self.hours = bases[0].seeds, bases[0].duration_s / 3600
        self.baseline = {b.name: self._p99_free(b) for b in bases}
        self.seed_rule = {sc.name: self._p99_seed(sc) for sc in self.scenarios}
        self._cache: dict[str, Evaluation] = {}
        # Evaluations kept on disk between runs (`--store`): a later search, a knob added,
        # reuses what an earlier one ran with the same code, seeds and hours.
        self._store = store
        self._stored: dict[str, Any] = {}
        if store is not None and store.exists():
            self._stored = json.loads(store.read_text(encoding="utf-8"))
        self.tried: dict[str, list[tuple[float, Evaluation]]] = {}  # the last search's, by knob

    def _p99_seed(self, sc: Scenario) -> float:
        spec = PolicySpec("seed-rule", lambda: SeedRule("seed-rule"))
        return summarize(run_policy(sc, spec)).ready["p99"]

    def _p99_free(self, base: Scenario) -> float:
        spec = PolicySpec("none", lambda: NoRemediation())
        return summarize(run_policy(base.with_faults(engine_init_hang=0.0), spec)).ready["p99"]

    def _key(self, config: PolicyFile) -> str:
        values = knob_values(config)
        # A knob at its off value is left out: what ran before the knob existed ran so.
        kept = {k: v for k, v in values.items() if not (k in ADDED_OFF and v == ADDED_OFF[k])}
        return f"{self.seeds}|{self.hours}|{kept!r}"

    def evaluate(self, config: PolicyFile) -> Evaluation:
        key = self._key(config)
        if key in self._cache:
            return self._cache[key]
        if key in self._stored:
            doc = self._stored[key]
            summaries = {name: _summary(s) for name, s in doc["summaries"].items()}
            ev = Evaluation(config, summaries, doc["score"], doc["admissible"], doc["late_s"],
                            doc["faults"])  # fmt: skip
            self._cache[key] = ev
            return ev
        summaries, ratios, faults = {}, [], []
        for sc in self.scenarios:
            spec = PolicySpec("candidate", lambda: CorePolicy("candidate", config))
            s = summarize(run_policy(sc, spec))
            summaries[sc.name] = s
            ratios.append(s.ready["p99"] / self.baseline[sc.name.rsplit(" ", 1)[0]])
            hangs = sc.faults.engine_init_hang > 0
            if s.false_kill_pct > (MAX_FALSE_KILL_PCT if hangs else 0.0):
                faults.append(f"{s.false_kill_pct:.2f}% false kills in {sc.name}")
            if s.kill_loops:
                faults.append(f"kill loops in {sc.name}")
            if s.hedge_gpu_minutes > MAX_HEDGE_SHARE * s.gpu_minutes:
                faults.append(f"hedges took over {MAX_HEDGE_SHARE:.0%} of GPU-minutes in {sc.name}")
            if s.ready["p99"] > self.seed_rule[sc.name] + 0.5:
                faults.append(f"P99 above the seed rule's in {sc.name}")
        ok = not faults
        geomean = math.exp(sum(math.log(max(r, 1e-9)) for r in ratios) / len(ratios))
        late = hung_pod_lateness(config)
        # Property 1 (whole-second timestamps: one second of slack) and property 2 (no kill
        # loop, above) make a candidate admissible; budgets adapt, so "within" means the
        # static budget here, where the one sibling's history is all there is.
        sibling_ok = late is not None and late <= 1.0
        if not sibling_ok:
            faults.append("the hung pod beside a Ready sibling not deleted in time")
        ev = Evaluation(config, summaries, geomean, ok and sibling_ok, late, faults)
        self._cache[key] = ev
        if self._store is not None:
            self._stored[key] = {
                "summaries": {name: s.to_json() for name, s in summaries.items()},
                "score": geomean, "admissible": ev.admissible, "late_s": late, "faults": faults,
            }  # fmt: skip
            self._store.write_text(json.dumps(self._stored), encoding="utf-8")
        self.out(f"  {knob_values(config)} -> score {ev.score:.2f} admissible {ev.admissible}")
        return ev

    def search(self, start: PolicyFile, home: PolicyFile, rounds: int = 1) -> Evaluation:
        """By coordinates from `start`; among values within noise of the best, the one
        nearest `home`'s (the defaults before: a default moves only as far as needed)."""
        best = self.evaluate(start)
        before = knob_values(home)
        for _ in range(rounds):
            for name, values, setter in KNOBS:
                tried = [(v, self.evaluate(setter(best.config, v))) for v in values]
                self.tried[name] = tried
                best = _pick(tried, before[name])
                self.out(f"{name}: keep {knob_values(best.config)[name]:g}")
        return best


def _pick(tried: list[tuple[float, Evaluation]], home: float) -> Evaluation:
    """Among the admissible values (all, if none is) whose score is within seed noise of
    the best, the one nearest `home`: change a default only as far as the evidence needs."""
    pool = [(v, e) for v, e in tried if e.admissible] or tried
    top = min(e.score for _, e in pool)
    near = [(v, e) for v, e in pool if e.score <= top * (1 + NOISE)]
    return min(near, key=lambda ve: abs(ve[0] - home) / max(abs(home), 1.0))[1]


def with_overrides(config: PolicyFile) -> PolicyFile:
    for name, _, setter in KNOBS:
        if name in OVERRIDES:
            config = setter(config, OVERRIDES[name][0])
    return config


def report(sweep: Sweep, start: Evaluation, best: Evaluation, final: Evaluation) -> str:
    old, new = knob_values(start.config), knob_values(best.config)
    code = knob_values(final.config)
    lines = [
        "# Stuck-pod defaults, chosen by simulation",
        "",
        "Regenerate: `.venv/bin/python -m remediator.sim.fleet.defaults --write "
        "docs/simulation-defaults.md` (deterministic: fixed seeds).",
        "",
        "Scenarios: `examples/sim/tuned.yaml` and `examples/sim/untuned.yaml`, each as given "
        "(spare GPUs) and with GPUs for its peak and no more (`no spare`), with "
        f"{', '.join(f'{r:.0%}' for r in HANG_RATES)} of cold starts hanging in engine init, "
        "in one of vLLM's steps (NCCL init, torch.compile, CUDA graph capture; "
        "`remediator/sim/fleet/steps.py`, step times from the public logs of "
        f"tests/data/vllm_logs); seeds {', '.join(str(x) for x in sweep.seeds)}, "
        f"{sweep.hours:g} virtual hours each. Admissible: false kills <= {MAX_FALSE_KILL_PCT}% "
        "of pods with hangs and none without, no kill loop (a replica whose would-be-Ready "
        "pods were deleted twice) and a P99 time to Ready no worse than the seed rule's, in "
        "every scenario; and a pod hung in engine init beside one Ready sibling is deleted "
        "within its budget plus checks (`remediator/sim/fleet/properties.py`). The search "
        "goes by coordinates, each knob in turn, from where it began (below). A knob moves "
        "only for a gain over "
        f"{NOISE:.0%} (seed noise), and then to the value nearest its value in "
        "the defaults before among those within that noise of the best. Score: geometric "
        "mean over the scenarios of "
        "P99 time to Ready per requested replica "
        "divided by the same fleet's P99 with no hangs and no remediation "
        f"({', '.join(f'{k} {v:.0f}s' for k, v in sweep.baseline.items())}).",
        "",
        f"The search began at: {BEGIN_NOTE}",
        "",
        "| knob | before | chosen by the search | the default now | why |",
        "|---|---|---|---|---|",
        *[f"| `{k}` | {old[k]:g} | {new[k]:g} | {code[k]:g} | {_why(sweep, k)} |" for k in old],
        "",
        *[f"`{k}` is {v:g} in the code: {why}." for k, (v, why) in OVERRIDES.items()],
        "",
        f"Score before {start.score:.2f} (admissible: {start.admissible}), "
        f"chosen {best.score:.2f} (admissible: {best.admissible}), the default now "
        f"{final.score:.2f} (admissible: {final.admissible}). The last column is what "
        "remediator/policy/config.py and remediator/guard/config.py say (a test checks).",
        "",
        "## Every candidate tried",
        "",
        "| " + " | ".join(k for k in old) + " | score | admissible | worst false kills "
        "| kill loops | hung pod deleted after budget+checks |",
        "|" + "---|" * (len(old) + 5),
    ]
    for ev in sorted(sweep._cache.values(), key=lambda e: (not e.admissible, e.score)):
        worst = max(s.false_kill_pct for s in ev.summaries.values())
        loops = sum(s.kill_loops for s in ev.summaries.values())
        vals = knob_values(ev.config)
        late = "never" if ev.late_s is None else f"{ev.late_s:+.0f}s"
        lines.append("| " + " | ".join(f"{vals[k]:g}" for k in old) +
                     f" | {ev.score:.2f} | {ev.admissible} | {worst:.2f}% | {loops} "
                     f"| {late} |")  # fmt: skip
    lines += ["", "## What the goals come to", "", GOALS_NOTE]
    lines += ["", "## The defaults now, scenario by scenario", "", _detail(sweep, final)]
    lines += ["", "## The defaults before, scenario by scenario", "", _detail(sweep, start)]
    return "\n".join(lines) + "\n"


def _why(sweep: Sweep, knob: str) -> str:
    """What each value scored when the knob's turn came (not admissible: why), and a note."""
    tried = sweep.tried.get(knob, [])
    scores = "; ".join(
        f"{v:g}: {e.score:.2f}" + ("" if e.admissible else f" (no: {e.faults[0]})")
        for v, e in tried
    )
    note = WHY.get(knob, "")
    return " ".join(x for x in (note, f"Tried {scores}." if scores else "") if x)


def _detail(sweep: Sweep, ev: Evaluation) -> str:
    rows = [
        "| scenario | replicas | ready P50 | P99 | ÷ hang-free | seed rule's P99 | <= seed "
        "| max | false kills | kill loops | deletions | held | GPU-min cold | hedges "
        "| hedge GPU-min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in ev.summaries.items():
        r = s.ready
        free = sweep.baseline[name.rsplit(" ", 1)[0]]
        seed = sweep.seed_rule[name]
        rows.append(
            f"| {name} | {s.replicas} | {_f(r['p50'])} | {_f(r['p99'])} | "
            f"{r['p99'] / free:.2f} | {_f(seed)} | {r['p99'] <= seed + 0.5} | {_f(r['max'])} | "
            f"{s.false_kills} ({s.false_kill_pct:.2f}%) | {s.kill_loops} | {s.deletions} | "
            f"{s.held} | {s.gpu_minutes:.0f} | {s.hedges} | {s.hedge_gpu_minutes:.0f} "
            f"({100 * s.hedge_gpu_minutes / max(s.gpu_minutes, 1e-9):.1f}%) |"
        )
    return "\n".join(rows)


def _f(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.0f}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", metavar="FILE", help="write the markdown report here")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--start", choices=("previous", "current"), default="previous",
                        help="search from the defaults before issue 14 (the table's 'before') "
                             "or from the code's defaults now")  # fmt: skip
    parser.add_argument("--seeds", default="1,2", help="seeds per scenario (default 1,2)")
    parser.add_argument("--hours", type=float, default=4.0, help="virtual hours per run")
    parser.add_argument("--store", metavar="FILE", help="keep evaluations here between runs")
    args = parser.parse_args(argv)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    given = [
        replace(load_scenario(EXAMPLES / f"{n}.yaml"), seeds=seeds, duration_s=args.hours * 3600)
        for n in ("tuned", "untuned")
    ]
    bases = [fleet for base in given for fleet in (base, no_spare(base))]
    store = Path(args.store) if args.store else None
    sweep = Sweep(bases, out=lambda line: print(line, file=sys.stderr), store=store)
    first = previous_defaults() if args.start == "previous" else PolicyFile()
    start = sweep.evaluate(first)
    best = sweep.search(begin(first), first, rounds=args.rounds)
    final = sweep.evaluate(with_overrides(best.config))
    text = report(sweep, start, best, final) + "\n" + floors.section(seeds, args.hours)
    text += "\n" + windows.section() + "\n" + cordons.section() + "\n" + warmups.section()
    text += "\n" + oracle.section()
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
