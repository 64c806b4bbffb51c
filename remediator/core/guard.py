"""The guard: candidates + now → `Decision | Suppressed`, and feedback for the decider.

It is the guard pipeline (`guard.pipeline`) and the state it keeps, plus the two
counters of what it let through and what it held. Whatever gets through, live or dry
run, yields the same `GotThrough` record: the decider's kill-loop memory, the guard
state and the runtime's outbox row are one path for both, so a dry run shows exactly
what a live run does, and survives a restart the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import replace

import msgspec
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import (
    Aging,
    Candidate,
    Feedback,
    GotThrough,
    GpuNews,
    HeldBehind,
    RetryAt,
)
from remediator.guard import GuardState, build_pipeline, engage, hold
from remediator.guard.blast_radius import workload_key
from remediator.guard.config import GuardConfig
from remediator.guard.hedge_budget import HedgeBudget, HedgeBudgetConfig, Standing, hear, standing
from remediator.guard.stage import HoldsUntil
from remediator.guard.watch_current import WatchCurrent
from remediator.policy.config import PolicyConfig
from remediator.policy.history import PhaseHistory, expected_cold_start
from remediator.policy.workloads import ready_created

__all__ = ["ClusterHistory", "Guard", "HedgeBudgetGauges", "Judged", "Verdicts", "workload_key"]

# What the guard said, and what goes back to the decider (None: nothing to remember).
Judged = tuple[Decision | Suppressed, Feedback | None]
# Pods held until old enough that the guard keeps looking out for (`Guard.aging`): a held
# pod is let go (by a look) within its hold anyway, so this bounds only a flood.
MAX_AGING = 10_000


# What a runtime logs when the guard state it restored holds `GuardState.foreign` records:
# after a rollback, a newer release's guardrails left records this release has no stage for.
FOREIGN_RECORDS = (
    "guard state holds records of guardrails this release does not have (a newer release "
    "wrote them): kept as they are and written back unchanged; they guard nothing here"
)


class HedgeBudgetGauges(Collector):
    """The hedge budget of the guard that holds it (serve's; on Kafka, the cluster tier's,
    in whichever worker holds it: `guards` gives none elsewhere), read at scrape time at
    that guard's clock: why a hedge was held is plain from a dashboard."""

    def __init__(self, guards: Callable[[], Iterable[tuple[Guard, float]]]) -> None:
        self._guards = guards  # each guard and its clock now

    def collect(self) -> Iterable[Metric]:
        gpu_s = GaugeMetricFamily(
            "remediator_hedge_budget_gpu_seconds",
            "The hedge budget over its window (guardrails.hedge_budget.window_s): GPU-seconds "
            "cold starts paid, hedges spent (a hedge charged in full until its stalled pod's "
            "end is heard, then what it held), and max_percent of the pay.",
            labels=["what"],
        )
        unsettled = GaugeMetricFamily(
            "remediator_hedges_unsettled",
            "Hedges let through whose stalled pod's end is not heard yet (charged in full).",
        )
        for guard, now in self._guards():
            s = guard.hedge_budget(now)
            for what, value in (("paid", s.paid), ("spent", s.spent), ("allowed", s.allowed)):
                gpu_s.add_metric([what], value)
            unsettled.add_metric([], s.unsettled)
        yield gpu_s
        yield unsettled


class Verdicts:
    """The guard's two counters; one per process, however many guards it runs."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._decided = Counter(
            "remediator_decisions_total",
            "Decisions let through the guardrails, by action.",
            ["action"],
            registry=registry,
        )
        self._suppressed = Counter(
            "remediator_suppressed_total",
            "Decisions a guardrail stopped, by action and guardrail.",
            ["action", "guardrail"],
            registry=registry,
        )
        # prometheus-client's labels() validates and locks on every call: keep the children
        # (a held pod is looked at again each check interval: a judgement per look).
        self._suppressed_children: dict[tuple[str, str], Counter] = {}
        self._decided_children: dict[str, Counter] = {}

    def suppressed(self, action: str, guardrail: str) -> Counter:
        key = (action, guardrail)
        child = self._suppressed_children.get(key)
        if child is None:
            child = self._suppressed_children[key] = self._suppressed.labels(action, guardrail)
        return child

    def decided(self, action: str) -> Counter:
        child = self._decided_children.get(action)
        if child is None:
            child = self._decided_children[action] = self._decided.labels(action)
        return child


class Guard:
    """`verdicts`: the counters to count into (shared by a process's guards), else new
    ones on `registry`. `keeps_rows`: the runtime stores the pods it holds until old
    enough (`take_aging_changed`); one process finds them again by judging again."""

    def __init__(
        self,
        config: GuardConfig | None,
        registry: CollectorRegistry | None = None,
        *,
        verdicts: Verdicts | None = None,
        keeps_rows: bool = False,
    ) -> None:
        self.pipeline = build_pipeline(config)
        self.state = GuardState()
        if verdicts is None:
            verdicts = Verdicts(registry if registry is not None else CollectorRegistry())
        self.verdicts = verdicts
        # Pod deletions held until the pod is as old as its model's expected cold start,
        # by pod UID (`reweigh`); `keeps_rows`: a runtime stores them, and takes the UIDs
        # whose entry changed (`take_aging_changed`).
        self.aging: dict[str, Aging] = {}
        self._keeps_rows = keeps_rows
        self._aging_changed: set[str] = set()
        self._until = {s.name: s for s in self.pipeline.stages if isinstance(s, HoldsUntil)}
        self._hedge_budget = (config or GuardConfig()).of(HedgeBudget.name, HedgeBudgetConfig)
        self._hedge_window_s = self._hedge_budget.window_s  # what `hear` keeps of the pay

    def judge(self, candidate: Candidate, now: float | None = None) -> Judged:
        """The guardrails' verdict on `candidate` at `now` (default: when it was made): both
        tiers of the pipeline, one after the other (`admit`, `settle`, `commit`)."""
        at = candidate.at if now is None else now
        held = self.admit(candidate, at)
        if held is not None:
            return held
        judged, through = self.settle(candidate, at)
        if through:
            self.commit(candidate, at)
        return judged

    def admit(self, candidate: Candidate, at: float) -> Judged | None:
        """The workload tier's verdict: why not, and the feedback; None: on to `settle`.
        A guard that holds some workloads' part of the first tier calls this alone."""
        decision = candidate.decision
        held, self.state = self.pipeline.admit(decision, at, self.state)
        if decision.uid is not None and decision.uid in self.aging:
            del self.aging[decision.uid]  # looked at again: what it says now stands
            self._changed(decision.uid)
        return None if held is None else self._held(candidate, held, at)

    def settle(self, candidate: Candidate, at: float) -> tuple[Judged, bool]:
        """The cluster tier's verdict on a candidate `admit` let on, and whether the first
        tier records it (`commit`): it got through, or a dry run held it."""
        result, self.state = self.pipeline.settle(candidate.decision, at, self.state)
        if isinstance(result, Suppressed):
            return self._held(candidate, result, at), result.simulated
        self.verdicts.decided(result.action).inc()
        return (result, GotThrough(result, at, False, candidate.partition, candidate.phase)), True

    def commit(self, candidate: Candidate, at: float) -> None:
        """The workload tier's record of a candidate `settle` let through."""
        self.state = self.pipeline.commit(candidate.decision, at, self.state)

    def _held(self, candidate: Candidate, held: Suppressed, at: float) -> Judged:
        """A "no", counted, and what goes back to the decider."""
        decision = candidate.decision
        self.verdicts.suppressed(decision.action, held.guardrail).inc()
        if held.simulated:  # a dry run: got through, as far as anything remembers
            return held, GotThrough(decision, at, True, candidate.partition, candidate.phase)
        if held.guardrail == WatchCurrent.name and decision.uid:
            # Looked at again the moment the picture has caught up, not at a retry time.
            return held, HeldBehind(decision, at, candidate.partition)
        if held.retry_at is not None:
            retry = RetryAt(decision, at, held.retry_at, candidate.partition, held.queued)
            self._age(retry, held.guardrail, candidate.model)
            return held, retry
        return held, None

    # ---- holds until old enough --------------------------------------------------------
    def _age(self, retry: RetryAt, guardrail: str, model: str | None) -> None:
        """Remember a pod held until old enough for its model's expected cold start."""
        uid = retry.decision.uid
        if (
            guardrail not in self._until
            or uid is None
            or model is None
            or retry.decision.expected_cold_start_s is None
            or retry.not_before <= retry.at
        ):
            return
        if len(self.aging) >= MAX_AGING:
            first = min(self.aging, key=lambda k: self.aging[k].retry.not_before)
            del self.aging[first]
            self._changed(first)
        self.aging[uid] = Aging(retry, model, guardrail)
        self._changed(uid)

    def reweigh(
        self, models: Collection[str], at: float, cold: Callable[[str], float]
    ) -> list[RetryAt]:
        """The estimate of a cold start of `models` may have changed at `at` (`cold`: it
        now): each pod of theirs held until it is as old as a higher estimate is looked at
        sooner where the new one lets it go sooner (a `sooner` RetryAt for its decider).
        One process and a guard over many partitions call it at the same instants (when a
        cold start finished), so both look again at the same times."""
        out: list[RetryAt] = []
        for uid, held in list(self.aging.items()):
            retry = held.retry
            if retry.not_before <= at:  # looked at by now: nothing left to move
                del self.aging[uid]
                self._changed(uid)
                continue
            if held.model not in models:
                continue
            estimate, was = cold(held.model), retry.decision.expected_cold_start_s
            if was is not None and estimate >= was:
                continue  # no lower than the hold's: it stands
            decision = replace(retry.decision, expected_cold_start_s=estimate)
            until = self._until[held.guardrail].not_before(decision, at)
            when = at if until is None else until  # (None: old enough now)
            if when >= retry.not_before:
                continue
            sooner = RetryAt(decision, at, when, retry.partition, sooner=True)
            self.aging[uid] = Aging(sooner, held.model, held.guardrail)
            self._changed(uid)
            out.append(sooner)
        return out

    def take_aging_changed(self) -> dict[str, Aging | None]:
        """The entries changed since the last call, by UID (None: gone), for a runtime
        that stores them (the Kafka guard's table)."""
        changed = {uid: self.aging.get(uid) for uid in self._aging_changed}
        self._aging_changed.clear()
        return changed

    def _changed(self, uid: str) -> None:
        if self._keeps_rows:
            self._aging_changed.add(uid)

    # ---- state -----------------------------------------------------------------------
    def set_kill_switch(self, engaged: bool, note: str = "") -> None:
        self.state = engage(self.state, engaged, note)

    def hear(self, news: GpuNews, at: float) -> None:
        """What a decider saw at `at` that hedges are weighed by (its `take_gpu_news`, or a
        partition's `Learned.gpus`): the cold starts that pay, the workloads short of GPUs."""
        self.state = hear(self.state, news, at, self._hedge_window_s)

    def hedge_budget(self, now: float) -> Standing:
        """Where the hedge budget stands at `now` (HedgeBudgetGauges)."""
        return standing(self.state, self._hedge_budget, now)

    def set_behind(self, why: str | None) -> None:
        """The runtime's picture may lag the cluster's (`why`), or has caught up (None):
        pod deletions are held meanwhile (guard/watch_current.py)."""
        self.state = hold(self.state, why or "")

    def restore(self, text: str | bytes) -> None:
        """Guard state as stored by a runtime (`GuardState.to_json`)."""
        self.state = self.pipeline.load_state(text)


class ClusterHistory:
    """Finished cold starts learned elsewhere (`Learned` records from every partition), and
    each decision's expected cold start and its workload's Ready pods weighed by them, as one
    process would: a guard over many partitions sees what no single partition's history
    holds."""

    def __init__(self, rules: PolicyConfig, learned: dict[str, list[float]] | None = None):
        self.rules = rules
        self.history = PhaseHistory(rules.stuck_pod.adaptive.window)
        self.learned: dict[str, list[float]] = {}  # "model\nphase" -> the last `window`
        for key, samples in (learned or {}).items():
            model, phase = key.split("\n", 1)
            self.learn((model, phase, seconds) for seconds in samples)

    def learn(self, samples: Iterable[tuple[str, str, float]]) -> set[str]:
        """Learn `samples`; the keys of `learned` they changed."""
        window = self.rules.stuck_pod.adaptive.window
        changed: set[str] = set()
        for model, phase, seconds in samples:
            self.history.add(model, phase, seconds)
            key = f"{model}\n{phase}"
            kept = self.learned.setdefault(key, [])
            kept.append(seconds)
            del kept[:-window]
            changed.add(key)
        return changed

    def expected(self, model: str | None) -> float:
        """What a cold start of `model` takes, by the cluster's history."""
        return expected_cold_start(self.rules.stuck_pod, self.history, model)

    def weigh(self, candidate: Candidate) -> Candidate:
        d = candidate.decision
        if d.expected_cold_start_s is None:
            return candidate
        cold = self.expected(candidate.model)
        # (the workload's pods every partition saw Ready: a decider saw its own and what
        # was relayed to it so far; one process sees them all)
        ready = ready_created(self.history, d.workload)
        weighed = replace(d, expected_cold_start_s=cold, ready_created=ready)
        return msgspec.structs.replace(candidate, decision=weighed)
