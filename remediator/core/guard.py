"""The guard: candidates + now → `Decision | Suppressed`, and feedback for the decider.

It is the guard pipeline (`guard.pipeline`) and the state it keeps, plus the two
counters of what it let through and what it held. Whatever gets through, live or dry
run, yields the same `GotThrough` record: the decider's kill-loop memory, the guard
state and the runtime's outbox row are one path for both, so a dry run shows exactly
what a live run does, and survives a restart the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import msgspec
from prometheus_client import CollectorRegistry, Counter

from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import Candidate, Feedback, GotThrough, HeldBehind, RetryAt
from remediator.guard import GuardState, build_pipeline, engage, hold
from remediator.guard.config import GuardConfig
from remediator.guard.watch_current import WatchCurrent
from remediator.policy.config import PolicyConfig
from remediator.policy.history import PhaseHistory, expected_cold_start

# What the guard said, and what goes back to the decider (None: nothing to remember).
Judged = tuple[Decision | Suppressed, Feedback | None]


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
    ones on `registry`."""

    def __init__(
        self,
        config: GuardConfig | None,
        registry: CollectorRegistry | None = None,
        *,
        verdicts: Verdicts | None = None,
    ) -> None:
        self.pipeline = build_pipeline(config)
        self.state = GuardState()
        if verdicts is None:
            verdicts = Verdicts(registry if registry is not None else CollectorRegistry())
        self.verdicts = verdicts

    def judge(self, candidate: Candidate, now: float | None = None) -> Judged:
        """The guardrails' verdict on `candidate` at `now` (default: when it was made)."""
        at = candidate.at if now is None else now
        decision = candidate.decision
        result, self.state = self.pipeline.run(decision, at, self.state)
        if isinstance(result, Suppressed):
            self.verdicts.suppressed(decision.action, result.guardrail).inc()
            if result.simulated:  # a dry run: got through, as far as anything remembers
                through = GotThrough(decision, at, True, candidate.partition, candidate.phase)
                return result, through
            if result.guardrail == WatchCurrent.name and decision.uid:
                # Looked at again the moment the picture has caught up, not at a retry time.
                return result, HeldBehind(decision, at, candidate.partition)
            if result.retry_at is not None:
                retry = RetryAt(decision, at, result.retry_at, candidate.partition, result.queued)
                return result, retry
            return result, None
        self.verdicts.decided(result.action).inc()
        return result, GotThrough(result, at, False, candidate.partition, candidate.phase)

    # ---- state -----------------------------------------------------------------------
    def set_kill_switch(self, engaged: bool, note: str = "") -> None:
        self.state = engage(self.state, engaged, note)

    def set_behind(self, why: str | None) -> None:
        """The runtime's picture may lag the cluster's (`why`), or has caught up (None):
        pod deletions are held meanwhile (guard/watch_current.py)."""
        self.state = hold(self.state, why or "")

    def restore(self, text: str | bytes) -> None:
        """Guard state as stored by a runtime (`GuardState.to_json`)."""
        self.state = self.pipeline.load_state(text)


class ClusterHistory:
    """Finished cold starts learned elsewhere (`Learned` records from every partition), and
    each decision's expected cold start weighed by them, as one process would: a guard
    over many partitions sees what no single partition's history holds."""

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

    def weigh(self, candidate: Candidate) -> Candidate:
        d = candidate.decision
        if d.expected_cold_start_s is None:
            return candidate
        cold = expected_cold_start(self.rules.stuck_pod, self.history, candidate.model)
        return msgspec.structs.replace(candidate, decision=replace(d, expected_cold_start_s=cold))
