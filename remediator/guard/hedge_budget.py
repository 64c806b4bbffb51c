"""hedge_budget: no hedge where GPUs are short, and hedges' GPU-minutes at most
`max_percent` of cold starts' GPU-minutes.

No hedge is let through while a workload is short of GPUs (a pod of it unschedulable for
`nvidia.com/gpu` within the rule's `stuck_pod.hedge.gpu_short_s`, as the deciders saw it):
the hedge pod would queue behind real demand, or take a GPU a real replica is waiting for. Any
workload, not only the hedge's own: a hedge of a small model takes the GPUs that would have
made a whole node for a large one waiting (bench/bench_sim.py, the untuned mixed-TP fleet
with an hour's GPU shortage and 5% hangs, seeds 1 and 2: P99 1,086 s with the hedge's own
workload's shortage alone, 900 s so; node pools are not told apart).

A hedge runs a second pod of a replica for a while: GPUs that serve nobody unless it wins.
Its cost is charged when it is let through: the GPUs of the hedge pod for
`charge_cold_starts` expected cold starts of its model (1: the most it runs before one of
the two is Ready). What pays for it is what the fleet's cold starts held of their GPUs,
scheduled to Ready, or to their end for those that ended unready (a hung pod's GPUs were
held all the same: the issue's cold-start GPU-minutes, as the simulator counts them). A
hedge is let through while the hedges charged, this one included, stay within `max_percent`
of that, both counted over the last `window_s` (a day, by the hour): a quiet month banks
nothing for a burst of stalls.

The charge is a reservation, settled when the stalled pod's stall ends (it is Ready, deleted,
or gone: the deciders' `GpuNews.ended`): a hedge is then charged what it can have held, its
GPUs from when its new pod was scheduled (`GpuNews.racer_scheduled`, as the hedge step's
annotation says), or else seen racing (it had a node: `GpuNews.raced`, less `RACED_SLACK_S`;
from when it was let through where that was not seen) to that end, plus
`SETTLE_SLACK_S` where the stalled pod won (its hedge pod is deleted then, and holds its GPUs
through its termination; to the racer's end instead where its decider, in another partition
perhaps, is heard to see it gone sooner: `GpuNews.racer_gone`), whether that is less than it
was charged (the rest is given back to the hour it was charged in) or more (the rest is
charged there too). So the budget counts what hedges held, as the simulator
measures it, and `charge_cold_starts` only says how much of the budget a hedge not settled
yet keeps from the next. A hung pod's hedge is its replacement from the moment its stall is
found, so what it held beside it is the stall's last stretch, not a cold start (the
simulated untuned fleet, seed 1, 4 h: a hedge held ~2 GPU-min against ~20 charged; charged
in full, 5 of its 21 hung pods were hedged, settled, 16). A hedge whose end is never heard
(a decider restarted, a record lost) stays charged what it was let through for.

The guard hears both from every decider (`hear`: `GpuNews`), so one guard over many Kafka
partitions holds and pays as one process does, in time order. Both live in the guard
state, so they outlive a restart as the other caps do (the state file, the replicas'
shared ConfigMap, the Kafka guard's changelog). A hedge that does not say its cost (its
GPUs, its model's expected cold start) is held: never guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from remediator.contract.decision import Decision
from remediator.contract.records import GpuNews
from remediator.guard.stage import DAY, HOUR, PASS, Verdict, fmt_hours, starts_pods, suppress
from remediator.guard.state import GuardState, StateError, read_number, read_object, read_rows
from remediator.inputs.pods import GPU_RESOURCE

Short = tuple[tuple[str, float, float], ...]  # (workload, seen at, short until)
# Hedges let through and not yet settled: (stalled pod's uid, charged at, GPUs, GPU-s charged).
Open = tuple[tuple[str, float, float, float], ...]
# Hedges settled with their stalled pod Ready, charged to its end + SETTLE_SLACK_S, until
# their racer is heard gone or that passes: (stalled pod's uid, the hour charged, held from,
# GPUs, stalled pod's end).
Won = tuple[tuple[str, float, float, float, float], ...]
# What a settled hedge may hold past its stalled pod's end as the engine saw it, where that
# pod won (Ready): the step's poll (2 s) before it deletes the loser, the hedge pod, whose
# termination holds its GPUs for up to its grace period (Kubernetes' default 30 s); rounded up.
# Where the stalled pod was deleted, the hedge pod is its replacement from then on: no slack.
SETTLE_SLACK_S = 45.0
# How long before its racer was seen a hedge pod may have held its GPUs: the hedge step names
# its racer within a poll (2 s) of its node, and the annotation's way to the decider (its
# watch) takes a moment more; rounded up. Before the racer had a node, the hedge held
# nothing: the workflow's start and the pod's scheduling (tuned fleet, seed 1, 3 h: the guard
# charged 27.0 GPU-min settled from the decision, the simulator measured 16.8).
RACED_SLACK_S = 5.0
# The counts are kept by the HOUR: a window is whole hours, plus the one going.


@dataclass(frozen=True, slots=True)
class HedgeBudgetConfig:
    max_percent: float = field(default=5.0, metadata={"min": 0, "max": 100})
    # A hedge's charge, in expected cold starts of its pod's GPUs (1: the most it runs).
    charge_cold_starts: float = field(default=1.0, metadata={"min": 0})
    # Over how long both are counted: a day of cold starts pays for that day's hedges.
    window_s: float = field(default=DAY, metadata={"min": HOUR, "max": 7 * DAY})


Hours = tuple[tuple[float, float, float], ...]  # (hour's start, GPU-s paid, GPU-s spent)


@dataclass(frozen=True, slots=True)
class HedgeBudgetState:
    hours: Hours = ()  # the window's hours, oldest first; an hour with nothing is left out
    short: Short = ()  # workloads short of GPUs, the last sighting of each
    open: Open = ()  # hedges charged and not settled, in the window
    won: Won = ()  # hedges settled, their stalled pod Ready: their racer's end may lower them

    @property
    def paid(self) -> float:
        """GPU-seconds of cold starts heard of, in the hours kept."""
        return sum(h[1] for h in self.hours)

    @property
    def spent(self) -> float:
        """GPU-seconds charged to the hedges let through, in the hours kept."""
        return sum(h[2] for h in self.hours)

    def within(self, now: float, window_s: float) -> tuple[float, float]:
        """(paid, spent) over the hours that overlap the window ending at `now`."""
        kept = [h for h in self.hours if h[0] + HOUR > now - window_s]
        return sum(h[1] for h in kept), sum(h[2] for h in kept)

    def add(self, at: float, window_s: float, paid: float = 0.0, spent: float = 0.0) -> Hours:
        """The hours with `paid` and `spent` added to `at`'s, and those out of the window
        ending at `at` dropped."""
        hour = at - at % HOUR
        kept = self.hours
        if kept and kept[-1][0] == hour and kept[0][0] + HOUR > at - window_s:
            # (most calls: a cold start heard in the hour going, no hour out of the window;
            # the hours are sorted, unique and not empty, as below and as read)
            last = kept[-1]
            return (*kept[:-1], (hour, last[1] + paid, last[2] + spent))
        hours = {h[0]: (h[1], h[2]) for h in kept if h[0] + HOUR > at - window_s}
        was_paid, was_spent = hours.get(hour, (0.0, 0.0))
        hours[hour] = (was_paid + paid, was_spent + spent)
        return tuple((h, p, s) for h, (p, s) in sorted(hours.items()) if p or s)

    def settle(self, news: GpuNews, at: float) -> HedgeBudgetState:
        """Each ended hedge charged what it can have held (from its racer's scheduling, or
        its racer seen less `RACED_SLACK_S`, or else from its charge: `_held_from`; to its
        stalled pod's end, and
        `SETTLE_SLACK_S` past it unless that pod was deleted: `replaced`) instead of what
        it was charged, in the hour it was charged in; and each won one whose racer is heard
        gone charged to that end instead, where it is sooner. Those won are kept until their
        racer is heard gone or their slack has passed by `at`."""
        ends, replaced = dict(news.ended), frozenset(news.replaced)
        raced, scheduled = dict(news.raced), dict(news.racer_scheduled)
        hours = {h[0]: [h[1], h[2]] for h in self.hours}
        won = list(self.won)
        for uid, charged, gpus, charge in self.open:
            end = ends.get(uid)
            hour = hours.get(charged - charged % HOUR)
            if end is None or hour is None:
                continue
            start = _held_from(charged, raced.get(uid), scheduled.get(uid))
            slack = 0.0 if uid in replaced else SETTLE_SLACK_S
            held = gpus * max(0.0, end - start + slack)
            hour[1] = max(0.0, hour[1] - charge + held)
            if slack:
                won.append((uid, charged - charged % HOUR, start, gpus, end))
        gone, kept = dict(news.racer_gone), []
        for uid, hour_at, start, gpus, end in won:
            hour, left = hours.get(hour_at), gone.get(uid)
            if hour is not None and left is not None:
                # (held to whichever came first: the racer gone, or the slack's end)
                unheld = gpus * max(0.0, end + SETTLE_SLACK_S - max(left, end, start))
                hour[1] = max(0.0, hour[1] - unheld)
            elif hour is not None and at < end + SETTLE_SLACK_S:
                kept.append((uid, hour_at, start, gpus, end))
        rows = tuple((h, p, s) for h, (p, s) in sorted(hours.items()) if p or s)
        return replace(self, hours=rows, won=tuple(kept))

    def still_open(self, ended: tuple[tuple[str, float], ...], window_s: float, at: float) -> Open:
        """The hedges left to settle: not ended, and charged in an hour still in the window."""
        gone = {uid for uid, _ in ended}
        return tuple(
            o for o in self.open if o[0] not in gone and o[1] - o[1] % HOUR + HOUR > at - window_s
        )

    def to_doc(self) -> Any:
        doc: dict[str, Any] = {
            "hours": [list(h) for h in self.hours],
            "short": [list(s) for s in self.short],
        }
        if self.open:  # (only then: a release from before settling reads the rest back)
            doc["open"] = [list(o) for o in self.open]
        if self.won:  # (as above)
            doc["won"] = [list(w) for w in self.won]
        return doc

    @classmethod
    def from_doc(cls, value: Any, path: str) -> HedgeBudgetState:
        obj = read_object(value, path, {"hours", "short", "open", "won", "paid", "spent"})
        short = _read_short(obj.get("short", []), f"{path}.short")
        opened = _read_open(obj.get("open", []), f"{path}.open")
        won = _read_won(obj.get("won", []), f"{path}.won")
        # An older release's counts ("paid", "spent": since its state began, or per deciding
        # engine) say nothing of when: they start from nothing (no hedge until paid again).
        return cls(_read_hours(obj.get("hours", []), f"{path}.hours"), short, opened, won)


def _held_from(charged: float, raced: float | None, scheduled: float | None) -> float:
    """When a hedge began to hold GPUs: its racer's scheduling where that is known (no later
    than it was seen racing: the API server's clock may run ahead of ours), or its racer
    seen less `RACED_SLACK_S`, or its decision; never before its decision."""
    if scheduled is not None:
        return max(charged, min(scheduled, raced if raced is not None else scheduled))
    return max(charged, (raced if raced is not None else charged) - RACED_SLACK_S)


def _read_hours(raw: Any, path: str) -> Hours:
    out: list[tuple[float, float, float]] = []
    for where, item in read_rows(raw, path, "[hour's start, GPU-s paid, GPU-s spent]", 3):
        hour, paid, spent = (read_number(v, where) for v in item)
        if paid < 0 or spent < 0:
            raise StateError(where, "GPU-seconds must not be negative")
        out.append((hour, paid, spent))
    # As `add` keeps them: one row an hour (the last read), none with nothing in it.
    rows = {hour: (paid, spent) for hour, paid, spent in out}
    return tuple((h, p, s) for h, (p, s) in sorted(rows.items()) if p or s)


def _read_open(raw: Any, path: str) -> Open:
    out: list[tuple[str, float, float, float]] = []
    shape = "[pod uid, charged at, GPUs, GPU-s charged]"
    for where, item in read_rows(raw, path, shape, 4):
        if not isinstance(item[0], str):
            raise StateError(where, f"expected {shape}")
        at, gpus, charge = (read_number(v, where) for v in item[1:])
        if gpus < 0 or charge < 0:
            raise StateError(where, "GPUs and GPU-seconds must not be negative")
        out.append((item[0], at, gpus, charge))
    return tuple(out)


def _read_won(raw: Any, path: str) -> Won:
    out: list[tuple[str, float, float, float, float]] = []
    shape = "[pod uid, hour charged, held from, GPUs, stalled pod's end]"
    for where, item in read_rows(raw, path, shape, 5):
        if not isinstance(item[0], str):
            raise StateError(where, f"expected {shape}")
        hour, start, gpus, end = (read_number(v, where) for v in item[1:])
        if gpus < 0:
            raise StateError(where, "GPUs must not be negative")
        out.append((item[0], hour, start, gpus, end))
    return tuple(out)


def _read_short(raw: Any, path: str) -> Short:
    out: list[tuple[str, float, float]] = []
    for where, (workload, seen, until) in read_rows(raw, path, "[workload, seen_at, until]", 3):
        if not isinstance(workload, str):
            raise StateError(where, "expected [workload, seen_at, until]")
        out.append((workload, read_number(seen, where), read_number(until, where)))
    return tuple(out)


def hear(state: GuardState, news: GpuNews, at: float, window_s: float = DAY) -> GuardState:
    """What a decider saw by `at`: cold starts that held `news.gpu_s` GPU-seconds
    (what pays for hedges, counted in `at`'s hour), workloads short of GPUs (the latest
    sighting of each is kept; one over by `at` is forgotten), and hedged pods whose stall
    ended (their hedges settled)."""
    budget = before = state.of(HedgeBudget.name, HedgeBudgetState)
    if not (news.short or news.ended or budget.short or budget.open or budget.won):
        # (most calls: a cold start's pay, nothing short of GPUs, no hedge open; what the
        # rest below comes to then, at about half its cost: it runs once per cold start)
        hours = budget.add(at, window_s, paid=max(news.gpu_s, 0.0))
        if hours == budget.hours:
            return state
        # (known: the hours are not empty, so it is not the default)
        return state.put(HedgeBudget.name, HedgeBudgetState(hours, (), ()), default=not hours)
    short = {w: (seen, until) for w, seen, until in budget.short if until > at}
    for workload, seen, until in news.short:
        if until > at and seen >= short.get(workload, (seen, until))[0]:
            short[workload] = (seen, until)
    kept = tuple((w, seen, until) for w, (seen, until) in sorted(short.items()))
    if news.ended or budget.won:
        budget = budget.settle(news, at)
    hours = budget.add(at, window_s, paid=max(news.gpu_s, 0.0))
    opened = budget.still_open(news.ended, window_s, at)
    after = HedgeBudgetState(hours, kept, opened, budget.won)
    if after == before:
        return state
    return state.put(HedgeBudget.name, after)


@dataclass(frozen=True, slots=True)
class Standing:
    """The budget at a moment, for on-call (the runtime's gauges): GPU-seconds the window's
    cold starts paid, its hedges spent, what `max_percent` of the pay allows, and how many
    hedges are let through and not settled yet."""

    paid: float
    spent: float
    allowed: float
    unsettled: int


def standing(state: GuardState, config: HedgeBudgetConfig, now: float) -> Standing:
    budget = state.of(HedgeBudget.name, HedgeBudgetState)
    paid, spent = budget.within(now, config.window_s)
    unsettled = len(budget.still_open((), config.window_s, now))
    return Standing(paid, spent, paid * config.max_percent / 100, unsettled)


def charge_gpu_s(decision: Decision, cold_starts: float) -> float | None:
    """What the hedge may cost: its pod's GPUs for `cold_starts` expected cold starts."""
    gpus, cold = decision.gpus, decision.expected_cold_start_s
    if gpus is None or gpus <= 0 or cold is None or cold < 0:
        return None
    return gpus * cold * cold_starts


def _minutes(gpu_s: float) -> str:
    return f"{gpu_s / 60:.1f} GPU-min"


def _short(
    budget: HedgeBudgetState, workload: str | None, now: float
) -> tuple[str, float, float] | None:
    """A workload short of GPUs at `now`, `workload` itself first: which, when it was last
    seen so and until when that holds (None: none is)."""
    short = [(w, seen, until) for w, seen, until in budget.short if seen <= now < until]
    return next((s for s in short if s[0] == workload), short[0] if short else None)


@dataclass(frozen=True, slots=True)
class HedgeBudget:
    name: ClassVar[str] = "hedge_budget"
    Config: ClassVar[type[Any]] = HedgeBudgetConfig
    State: ClassVar[type[Any] | None] = HedgeBudgetState
    simulates: ClassVar[bool] = False
    config: HedgeBudgetConfig = HedgeBudgetConfig()

    def check(self, decision: Decision, now: float, state: GuardState) -> Verdict:
        if not starts_pods(decision):
            return PASS
        budget = state.of(self.name, HedgeBudgetState)
        short = _short(budget, decision.workload, now)
        if short is not None:  # no retry: the pod's stall goes on to its end (hung: deleted)
            workload, seen, until = short
            why = ("a hedge would queue behind real demand" if workload == decision.workload
                   else "a hedge would take GPUs its pods wait for")  # fmt: skip
            return suppress(
                f"no hedge: {workload} is short of GPUs (a pod of it was unschedulable for "
                f"{GPU_RESOURCE} {now - seen:.0f}s ago, within {until - seen:.0f}s); {why}"
            )
        charge = charge_gpu_s(decision, self.config.charge_cold_starts)
        if charge is None:
            return suppress(
                f"hedge budget: {decision.where}'s GPUs or expected cold start unknown: "
                "never guess what a hedge costs"
            )
        paid, spent = budget.within(now, self.config.window_s)
        allowed = paid * self.config.max_percent / 100
        if spent + charge > allowed:
            return suppress(
                f"hedge budget: {_minutes(spent)} of hedges + {_minutes(charge)} for "
                f"this one would exceed {self.config.max_percent:g}% of "
                f"{_minutes(paid)} of cold starts ({_minutes(allowed)}) in the last "
                f"{fmt_hours(self.config.window_s)}"
            )  # no retry, as above
        return PASS

    def record(self, decision: Decision, now: float, state: GuardState) -> GuardState:
        charge = charge_gpu_s(decision, self.config.charge_cold_starts)
        if not starts_pods(decision) or charge is None:
            return state
        budget = state.of(self.name, HedgeBudgetState)
        window = self.config.window_s
        hours = budget.add(now, window, spent=charge)
        opened = budget.still_open((), window, now)
        if decision.uid:  # (settled when its stalled pod's end is heard)
            opened += ((decision.uid, now, float(decision.gpus or 0), charge),)
        return state.put(self.name, HedgeBudgetState(hours, budget.short, opened, budget.won))
