"""Who watches the simulated cluster and decides: nobody, the SREs' rule, or the core.

Each controller is fed what the cluster emits and asked, as virtual time passes, for the
decisions it lets through; the simulation carries them out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from mypy_extensions import mypyc_attr

from remediator.contract.decision import Decision, Suppressed
from remediator.inputs.pods import engine_run
from remediator.inputs.records import Input, PodSeen
from remediator.policy.incident import incident_id
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile
from remediator.session import Session
from remediator.timeline.tracker import StateChange


class Controller(Protocol):
    name: str
    wants_inputs: bool

    def feed(self, item: Input) -> None: ...
    def advance(self, now: float) -> None: ...
    def take(self) -> list[Decision]: ...
    def applied(self, decision: Decision) -> None: ...  # the simulation carried it out
    def held(self) -> int: ...
    def next_due(self) -> float | None: ...


def log_follows(controller: object) -> int:
    """How many pods' engine logs the controller reads at once (0: it follows none)."""
    follows = getattr(controller, "follows_logs", 0)
    return follows if isinstance(follows, int) else 0


def logs_wanted(controller: object) -> Callable[[], list[str]] | None:
    """The pods whose log the controller asks for before it judges them (a controller
    running the core: `PolicyEngine.logs_wanted`); None for one that asks for none."""
    wanted = getattr(controller, "logs_wanted", None)
    return wanted if callable(wanted) else None


def finds_hangs_after(controller: object) -> float | None:
    """Seconds after a hang begins that the controller is told of it (the simulator's ground
    truth: `Oracle`); None for every real controller."""
    after = getattr(controller, "finds_hangs_after_s", None)
    return float(after) if isinstance(after, (int, float)) else None


@mypyc_attr(allow_interpreted_subclasses=True)  # (tests watch the simulation through one)
class NoRemediation:
    """No remediation: pods are left to the Deployment and to on-call."""

    wants_inputs = False

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def feed(self, item: Input) -> None:
        return None

    def advance(self, now: float) -> None:
        return None

    def take(self) -> list[Decision]:
        return []

    def applied(self, decision: Decision) -> None:
        return None

    def next_due(self) -> float | None:
        return None

    def held(self) -> int:
        return 0


@dataclass(frozen=True, slots=True)
class Note:
    """What the core said of a pod beside its decisions: a guardrail held one (`held`), or
    it let one be (`ignored`: no hedge, and why), at the session's time then."""

    pod: str
    at: float
    kind: str  # held | ignored
    action: str  # the decision held ("" for an ignored one)
    why: str
    guardrail: str = ""  # the one that held it


@dataclass
class _Sink:
    """A Session sink that keeps what the simulation needs and counts the rest; with
    `notes` on, what was held or let be of each pod too (`remediator simulate --tail`)."""

    acts: list[Decision] = field(default_factory=list)
    held_count: int = 0
    notes: list[Note] | None = None
    # The session's clock, for the notes: when a guardrail held a decision, not the
    # decision's own time (a timer that fired late backdates it to when it was due).
    clock: Callable[[], float] | None = None

    def transition(self, change: StateChange) -> None:
        return None

    def decision(self, decision: Decision) -> None:
        self.acts.append(decision)

    def suppressed(self, suppressed: Suppressed) -> None:
        self.held_count += 1
        if self.notes is not None and self.clock is not None:
            d, why = suppressed.decision, suppressed.reason
            self.notes.append(Note(d.target, self.clock(), "held", d.action, why,
                                   suppressed.guardrail))  # fmt: skip

    def ignored(self, ignored: Ignored) -> None:
        if self.notes is not None and self.clock is not None:
            pod = ignored.subject.rpartition("/")[2]
            self.notes.append(Note(pod, self.clock(), "ignored", "", ignored.reason))


@mypyc_attr(allow_interpreted_subclasses=True)  # (tests record its stream through one)
class CorePolicy:
    """remediator's own core (Session: tracker, policy engine, guardrails), unchanged."""

    wants_inputs = True

    def __init__(self, name: str, config: PolicyFile) -> None:
        self.name = name
        self.session = Session(config)
        self.sink = _Sink()
        logs = config.rules.engine_logs
        self.follows_logs = logs.max_pods if logs.follow else 0  # as serve's follower would
        self._decider = self.session.decider
        self.logs_wanted = self._decider.engine.logs_wanted

    def keep_notes(self) -> None:
        """Keep what the core held or let be, pod by pod, from now on (`notes`)."""
        if self.sink.notes is None:
            self.sink.notes = []
            self.sink.clock = lambda: self._decider.now

    @property
    def notes(self) -> list[Note]:
        return self.sink.notes or []

    def feed(self, item: Input) -> None:
        # (called once or more per simulated event: compiled, each call below is a C call)
        self.session.feed(item, self.sink)
        if type(item) is PodSeen and item.watch == "DELETED":
            self.session.tracker.forget(item.uid)  # as the runtime prunes deleted pods

    def advance(self, now: float) -> None:
        self.session.advance(now, self.sink)

    def next_due(self) -> float | None:
        due = self._decider.engine.next_deadline()
        if due is None:
            return None
        # A timer armed in the session's past fires on the next advance past its clock.
        soonest = self._decider.now + 1e-3
        return due if due > soonest else soonest

    def take(self) -> list[Decision]:
        out = self.sink.acts
        if out:  # (most calls find none: no new list for them)
            self.sink.acts = []
        return out

    def applied(self, decision: Decision) -> None:
        return None

    def held(self) -> int:
        return self.sink.held_count


class Oracle(CorePolicy):
    """The core as configured, and beside it what no real detector has: every hang (a driver
    that never starts a container, an engine init that stops in a step) is found
    `finds_hangs_after_s` seconds after it began, from the simulator's ground truth, and
    its pod deleted as a hung pod is (the same workflow, its delay, its replacement). A
    bound, not a policy: the P99 a detector that fast would reach (sim/fleet/oracle.py)."""

    def __init__(self, name: str, config: PolicyFile, finds_hangs_after_s: float) -> None:
        super().__init__(name, config)
        if finds_hangs_after_s < 0:
            raise ValueError(f"finds_hangs_after_s must be >= 0, not {finds_hangs_after_s}")
        self.finds_hangs_after_s = finds_hangs_after_s


class SeedRule:
    """The rule SREs run: every `interval` s, every pod with app=vllm-inference whose engine
    init (container started, not Ready) is over `budget` s on `checks` checks in a row is
    deleted. No history, no minimum age, no caps."""

    wants_inputs = True

    def __init__(
        self, name: str = "seed-rule", budget: float = 60.0, checks: int = 3, interval: float = 10.0
    ) -> None:
        self.name = name
        self.budget, self.checks, self.interval = budget, checks, interval
        self._init: dict[str, tuple[str, str, float]] = {}  # uid -> (ns, name, started)
        self._over: dict[str, int] = {}
        self._next: float | None = None
        self._acts: list[Decision] = []

    def feed(self, item: Input) -> None:
        if not isinstance(item, PodSeen) or item.labels.get("app") != "vllm-inference":
            return
        if item.watch == "DELETED" or item.ready is not None:
            self._init.pop(item.uid, None)
            self._over.pop(item.uid, None)
        elif (started := engine_run(item.statuses, None).started) is not None:
            self._init[item.uid] = (item.namespace, item.name, started)
        if self._next is None and item.at is not None:
            self._next = item.at + self.interval

    def advance(self, now: float) -> None:
        if not self._init and self._next is not None and self._next < now:
            self._next += (now - self._next) // self.interval * self.interval  # idle: skip ahead
        while self._next is not None and self._next <= now:
            self._check(self._next)
            self._next += self.interval

    def next_due(self) -> float | None:
        return self._next if self._init else None

    def _check(self, now: float) -> None:
        for uid, (ns, name, started) in list(self._init.items()):
            if now - started <= self.budget:
                continue
            n = self._over[uid] = self._over.get(uid, 0) + 1
            if n >= self.checks:
                del self._init[uid], self._over[uid]
                why = f"engine init {now - started:.0f}s > {self.budget:g}s on {n} checks"
                self._acts.append(
                    Decision("delete-pod", ns, name, why, incident_id("seed", uid), now, uid=uid)
                )

    def take(self) -> list[Decision]:
        out, self._acts = self._acts, []
        return out

    def applied(self, decision: Decision) -> None:
        return None

    def held(self) -> int:
        return 0
