"""What happens to one simulated pod, drawn from a seeded RNG, and the truth it implies.

Durations are drawn around one production cluster's figures (issue 2): image pull
~182 s, container start ~94 s, engine init ~236 s. Times the API server writes in
whole seconds are kept in whole seconds here, so the truth is exact.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

from tests.simstream.forms import CREATED_FORMS, reported_pull_seconds

BASE_TIME = 1_740_816_000  # 2025-03-01T08:00:00Z
NODES = tuple(f"ip-10-20-{8 + i // 4}-{17 + 23 * i}.us-west-2.compute.internal" for i in range(8))
NAMESPACES = ("inference", "inference", "inference", "inference-canary")
# (deployment, model, weight)
MODELS = (
    ("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),
    ("vllm-llama-70b-fp8", "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", 1),
    ("vllm-qwen-72b", "Qwen/Qwen2.5-72B-Instruct", 1),
)
IMAGES = ("vllm/vllm-openai:v0.6.3", "vllm/vllm-openai:v0.6.4.post1", "vllm/vllm-openai:v0.6.6")
SCENARIOS = ("cold", "warm", "cached", "stuck", "unschedulable")
_SCENARIO_WEIGHTS = (60, 18, 6, 8, 8)
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet
_SUFFIX_SPACE = len(_SUFFIX) ** 5
_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class PodTruth:
    """What a correct core reports for the pod once its whole stream is applied."""

    uid: str
    namespace: str
    name: str
    node: str | None
    model: str
    tp_size: str
    gpu_util: str
    state: str
    phases: dict[str, float | None]
    total: float | None


@dataclass(frozen=True, slots=True)
class PodPlan:
    index: int
    namespace: str
    deployment: str
    name: str
    uid: str
    replicaset: str
    rs_uid: str
    node: str | None
    model: str
    image: str
    gpu_util: str
    scenario: str
    pull_form: str
    created_form: str
    new_events_api: bool  # events arrive through events.k8s.io/v1
    pulling_seen: bool  # the `Pulling` event reached the watch (events are best-effort)
    created: int  # whole seconds from here on
    scheduled: int | None
    pulling: int | None
    pulled: int | None
    pull_ns: int
    waiting_ns: int
    image_size: int
    container_created: int | None
    started: int | None
    ready: int | None
    unhealthy: int  # readiness probe failures during engine init
    failed_scheduling: int  # FailedScheduling repeats of an unschedulable pod

    def truth(self) -> PodTruth:
        return PodTruth(
            uid=self.uid,
            namespace=self.namespace,
            name=self.name,
            node=self.node,
            model=self.model,
            tp_size="2",
            gpu_util=self.gpu_util,
            state=_state(self),
            phases=_phases(self),
            total=None if self.ready is None else float(self.ready - self.created),
        )


def _state(p: PodPlan) -> str:
    if p.scheduled is None:
        return "scheduling"
    return "ready" if p.ready is not None else "engine_init"


def _phases(p: PodPlan) -> dict[str, float | None]:
    def span(end: int | None, start: int | None) -> float | None:
        return None if end is None or start is None else float(end - start)

    image_pull: float | None = None
    pull_end = p.scheduled
    if p.pull_form == "present" and p.scheduled is not None:
        image_pull = 0.0  # the node had the image: the `Pulled` says so
    elif p.pulled is not None:
        pull_end = p.pulled
        if p.pulling_seen:
            image_pull = span(p.pulled, p.pulling)
        else:
            image_pull = reported_pull_seconds(p.pull_form, p.pull_ns, p.waiting_ns)
    return {
        "scheduling": span(p.scheduled, p.created),
        "image_pull": image_pull,
        "container_start": span(p.started, pull_end),
        "engine_init": span(p.ready, p.started),
        "first_token": None,
    }


class Planner:
    """Draws pod plans; pod i is created after pod i-1 (a rollout or a scale-up)."""

    def __init__(self, seed: int, scenario_weights: tuple[int, ...] = _SCENARIO_WEIGHTS) -> None:
        self.rng = random.Random(seed)
        self.weights = scenario_weights
        self.clock = float(BASE_TIME)
        self._offset = self.rng.randrange(_SUFFIX_SPACE)

    def next(self, index: int, **force: str) -> PodPlan:
        r = self.rng
        self.clock += r.expovariate(1 / 4.0)  # a new pod every ~4 s
        created = int(self.clock)
        deployment, model, _ = r.choices(MODELS, weights=[m[2] for m in MODELS])[0]
        scenario = force.get("scenario") or r.choices(SCENARIOS, weights=self.weights)[0]
        pull_form = force.get("pull_form") or _pull_form(r, scenario)
        if pull_form == "present":
            scenario = "warm" if scenario in ("cold", "cached") else scenario
        elif pull_form == "ms":
            scenario = "cached" if scenario in ("cold", "warm") else scenario
        elif scenario in ("warm", "cached"):
            scenario = "cold"
        rs_hash = _rs_hash(deployment, model)
        return _timed(
            r,
            dict(
                index=index,
                namespace=r.choice(NAMESPACES),
                deployment=deployment,
                name=f"{deployment}-{rs_hash}-{self._suffix(index)}",
                uid=_uuid(r),
                replicaset=f"{deployment}-{rs_hash}",
                rs_uid=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{deployment}-{rs_hash}")),
                model=model,
                image=r.choice(IMAGES),
                gpu_util=r.choice(("0.85", "0.85", "0.85", "0.9")),
                scenario=scenario,
                pull_form=pull_form,
                created_form=force.get("created_form") or r.choice(CREATED_FORMS),
                new_events_api=force.get("events_api", r.choice(("core", "core", "new"))) == "new",
                pulling_seen=_pulling_seen(r, pull_form),
                created=created,
            ),
        )

    def _suffix(self, index: int) -> str:
        """Distinct for 14M pods: a fixed permutation of the index, in the pod-name alphabet."""
        n = (index * 7_368_787 + self._offset) % _SUFFIX_SPACE
        out = []
        for _ in range(5):
            n, d = divmod(n, len(_SUFFIX))
            out.append(_SUFFIX[d])
        return "".join(out)


def _pull_form(r: random.Random, scenario: str) -> str:
    if scenario == "warm":
        return "present"
    if scenario == "cached":
        return "ms"
    return r.choice(("old", "in", "waiting", "size", "size", "size"))


def _pulling_seen(r: random.Random, form: str) -> bool:
    if form == "present":
        return False  # the kubelet sends no `Pulling` for an image it has
    if form == "old":
        return True  # without Pulling an old message leaves the pull unknowable
    return r.random() > 0.15


def _timed(r: random.Random, plan: dict[str, Any]) -> PodPlan:
    created: int = plan["created"]
    scenario: str = plan["scenario"]
    if scenario == "unschedulable":
        return PodPlan(
            node=None, scheduled=None, pulling=None, pulled=None, pull_ns=0, waiting_ns=0,
            image_size=0, container_created=None, started=None, ready=None, unhealthy=0,
            failed_scheduling=r.randint(1, 6), **plan,
        )  # fmt: skip
    scheduled = created + _draw(r, 2.0, 1.5, 0, 30)
    pull_ns = waiting_ns = 0
    pulling = pulled = None
    form: str = plan["pull_form"]
    if form == "ms":
        pull_ns = r.randrange(200_000_000, 990_000_000)
    elif form != "present":
        pull_ns = int(_draw(r, 182.0, 35.0, 60, 600) * _NS) + r.randrange(_NS)
    if form != "present":
        waited = r.random() < 0.3 and form in ("waiting", "size")
        waiting_ns = pull_ns + (r.randrange(1, 40 * _NS) if waited else r.randrange(5_000_000))
        pulling = scheduled + _draw(r, 1.0, 0.5, 0, 3)
        pulled = pulling + (waiting_ns // _NS) + r.choice((0, 1))
    after_pull = pulled if pulled is not None else scheduled + 1
    started = after_pull + _draw(r, 94.0, 15.0, 20, 300)
    ready = None if scenario == "stuck" else started + _draw(r, 236.0, 40.0, 60, 900)
    return PodPlan(
        node=r.choice(NODES),
        scheduled=scheduled,
        pulling=pulling,
        pulled=pulled,
        pull_ns=pull_ns,
        waiting_ns=waiting_ns,
        image_size=r.randrange(8_000_000_000, 9_000_000_000),
        container_created=started - r.randint(0, 2),
        started=started,
        ready=ready,
        unhealthy=r.randint(3, 12) if scenario == "stuck" else r.randint(0, 3),
        failed_scheduling=0,
        **plan,
    )


def _draw(r: random.Random, mean: float, sd: float, lo: int, hi: int) -> int:
    return max(lo, min(hi, round(r.gauss(mean, sd))))


def _uuid(r: random.Random) -> str:
    return str(uuid.UUID(int=r.getrandbits(128), version=4))


def _rs_hash(deployment: str, model: str) -> str:
    """A pod-template-hash: stable per deployment, in the pod-name alphabet."""
    n = uuid.uuid5(uuid.NAMESPACE_DNS, deployment + model).int
    return "".join(_SUFFIX[(n >> (5 * i)) % len(_SUFFIX)] for i in range(10))
