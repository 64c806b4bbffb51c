"""The rules' sections of the policy file, parsed strictly.

    stuck_pod:      # pods whose current cold-start phase outlives its budget
    image_update:   # a new model image on an inference workload → warm the GPU nodes
    gpu_memory:     # GPU memory that does not settle → notify and cordon
    alerts:         # which alert names mean what

Everything has a default. The file as a whole (these and `guardrails:`) is read by
`remediator.policy_file`, which also finds the line of every fault.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from remediator.contract.errors import ConfigError
from remediator.policy.selector import Selector, SelectorError, parse_selector

BUDGET_PHASES = ("scheduling", "init", "image_pull", "container_start", "engine_init")
INIT_ACTIONS = ("notify", "delete-pod")
MIXED_GPUS = ("skip", "warm")
DEFAULT_SELECTOR = "app=vllm-inference"
MAX_HEDGE_S = 3600.0  # the hedge step's --timeout bound (steps/cli.py)


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    enabled: bool = True
    factor: float = 1.5  # budget = max(static, factor × P99 of recent completed phases)
    min_samples: int = 5  # completed phases of a model before its P99 sets the budget
    # Healthy siblings (completed cold starts of the model) before their P99 is the model's
    # expected cold start, which min_age waits for; until then `expected_cold_start_s`.
    min_siblings: int = 1
    window: int = 50  # completed timelines remembered per model and phase
    # Phases whose learned budget may also come in under the static one, never below
    # `lower_floor_s`. Container start only: a GPU driver hang (the container never starts)
    # on a fleet whose containers start in 3 s waited the seed's static 300 s. The floor
    # holds more than a whole untuned container and driver start (~94 s), so a fresh node's
    # first, slow start is never taken for a hang by siblings that started on warm ones. A
    # pull, scheduling or init that outlives its siblings is told, never deleted: no gain.
    lower: tuple[str, ...] = ("container_start",)
    lower_floor_s: float = 120.0


@dataclass(frozen=True, slots=True)
class ProgressConfig:
    """Progress-aware engine init, from vLLM's own steps: its log (`engine_logs.follow`, or
    EngineLog documents on /events) or its OpenTelemetry start-up spans (/v1/traces).

    A pod is stalled when the step it is in has run past `factor` × the `quantile` of what
    that step took the model's siblings (never less than `floor_s`), and hung when that
    lasts `checks` checks in a row; then it is deleted, before its phase budget. While the
    step it is in is judged this way, the phase budget does not apply: a start that keeps
    ending steps is never deleted for being slow overall, and one that has run slow so far
    (a slow node: its ended steps took 1.5 times or more what they took its siblings) has
    its limit widened by that pace, up to 4 times (`stall.pace_of`): slow is not stuck. A
    step with fewer than `min_samples` siblings' times, or a pod whose log is not read (or
    no longer is: the follow hit its byte bound or broke), keeps the phase budget.

    On, at a 30 s floor and twice the siblings' P95, by simulation
    (docs/simulation-defaults.md): hangs in torch.compile and CUDA graph capture are found
    before the phase budget, and no healthy pod was deleted."""

    enabled: bool = True
    factor: float = 2.0
    quantile: float = 0.95
    floor_s: float = 30.0
    # Siblings' times of a stretch before it is judged (their few widen its limit:
    # `history.few_samples_margin`); 3, not the search's 5, by random fleets
    # (docs/simulation-defaults.md)
    min_samples: int = 3


@dataclass(frozen=True, slots=True)
class HedgeConfig:
    """Hedged starts (`hedge-pod`, needs `progress`): when a pod's engine stalls in a step
    (before it counts as hung), its Deployment is surged by one; the first of the two pods
    Ready wins, the other is deleted and the Deployment returns to its replica count.

    No hedge while a pod of any workload was unschedulable for want of GPUs (Insufficient
    nvidia.com/gpu) in the last `gpu_short_s`: the hedge would queue behind real demand, or
    take GPUs that demand waits for (guard.hedge_budget).
    `timeout_s`: the step gives up waiting for either pod to be Ready and returns the
    workload to its count. One hedge per pod, ever; guardrails weigh it (blast_radius counts
    it, hedge_budget caps its GPU-minutes).

    `leave_to_race`: a stalled pod whose hedge pod has a node (the step's annotation names
    it racing) is not deleted for its stall while the race runs: the first Ready of the two
    wins (`policy.hedge.left_to_hedge`). Off by default, by simulation: it kept a healthy pod
    on a node slower than its siblings' from deletion, but a hung pod then holds its GPUs
    beside its hedge pod's until the race ends, and on a tight fleet of mixed sizes the
    largest pods waited longer for whole nodes (docs/hedging.md).

    `at`: the share of the stall's limit the stretch has run when the hedge starts (1: at
    the stall itself). A hedge deletes nothing that is not beaten, so it may start before
    the pod counts as stalled; the pod's deletion, should it hang, still waits for the
    stall and its checks. On, at 0.5, by simulation (docs/simulation-defaults.md); off
    wherever `progress` is (nothing shows a stall then), unless asked for by name."""

    enabled: bool = True
    at: float = 0.5
    gpu_short_s: float = 600.0
    timeout_s: float = 1800.0
    leave_to_race: bool = False


@dataclass(frozen=True, slots=True)
class StuckPodConfig:
    enabled: bool = True
    selector: Selector = field(default_factory=lambda: parse_selector(DEFAULT_SELECTOR))
    namespaces: tuple[str, ...] = ()  # empty: every namespace the watch sees
    budgets: Mapping[str, float] = field(
        default_factory=lambda: {
            "scheduling": 600.0,
            "init": 1800.0,  # init containers: a weights download (storage-initializer)
            "image_pull": 900.0,
            "container_start": 300.0,
            "engine_init": 60.0,
        }
    )
    # Consecutive checks over budget before deciding (the SREs' "3 in a row"). The search
    # preferred 1; 3 stay as the margin for per-model budgets set near the real engine init
    # (docs/simulation-defaults.md).
    checks: int = 3
    check_interval_s: float = 10.0
    # Per model: phase budgets, and `expected_cold_start_s` (MODEL_COLD_START) until its
    # history has one.
    models: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    adaptive: AdaptiveConfig = field(default_factory=AdaptiveConfig)
    progress: ProgressConfig = field(default_factory=ProgressConfig)
    hedge: HedgeConfig = field(default_factory=HedgeConfig)
    expected_cold_start_s: float = 600.0  # for a model with no history yet
    # The engine container by name (first match wins); else the one requesting GPUs.
    engine_containers: tuple[str, ...] = ()
    # A stuck init is told by default: deleting the pod restarts the download.
    init_action: str = "notify"


@dataclass(frozen=True, slots=True)
class ImageUpdateConfig:
    enabled: bool = True
    selector: Selector = field(default_factory=lambda: parse_selector(DEFAULT_SELECTOR))
    warmup_namespace: str = "kube-system"
    warmup_daemonset: str = "gpu-warmup"
    rollout_timeout_s: float = 900.0
    # Where the selected workloads' pods need different GPU counts (models of TP 1 to 8 on
    # one pool): "skip" warms nothing and says why, "warm" warms anyway. Warming puts the
    # image on every node, and kube-scheduler's default scoring (LeastAllocated) then spreads
    # the small pods over the emptiest nodes: the pods that need a whole node wait. By
    # simulation (docs/simulation.md): "warm" where nvidia.com/gpu is scored MostAllocated.
    mixed_gpus: str = "skip"


@dataclass(frozen=True, slots=True)
class GpuMemoryConfig:
    # On by simulation (docs/simulation-defaults.md, "Cordoning unsettled nodes"): uncordoned,
    # each replacement lands on the node again and hangs; guardrails.cordon_cap caps it.
    cordon: bool = True
    samples: int = 20
    interval_s: float = 1.0
    max_spread_mib: float = 512.0


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    stuck_pod: tuple[str, ...] = ("VLLMEngineInitSlow",)
    gpu_memory: tuple[str, ...] = ("GPUMemoryUnstable",)


@dataclass(frozen=True, slots=True)
class FirstTokenProbeConfig:
    """One streaming 1-token completion to a pod once it is Ready: its first-token time."""

    enabled: bool = False
    port: int = 8000  # when the pod's args name no --port
    path: str = "/v1/completions"
    model: str = ""  # "": the pod's --served-model-name, else its --model
    timeout_s: float = 30.0
    max_concurrent: int = 4  # never more probes at once
    attempts: int = 3
    retry_s: float = 10.0


@dataclass(frozen=True, slots=True)
class EngineLogsConfig:
    """Follow an inference pod's log while it is in engine init, for vLLM's steps (on by
    default: progress-aware detection reads them; RBAC `pods/log` get)."""

    follow: bool = True
    max_pods: int = 8  # logs followed at once (more gained nothing in simulation)
    max_bytes: int = 1 << 20  # per pod (the server stops sending there: limitBytes)


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    stuck_pod: StuckPodConfig = field(default_factory=StuckPodConfig)
    image_update: ImageUpdateConfig = field(default_factory=ImageUpdateConfig)
    gpu_memory: GpuMemoryConfig = field(default_factory=GpuMemoryConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    first_token_probe: FirstTokenProbeConfig = field(default_factory=FirstTokenProbeConfig)
    engine_logs: EngineLogsConfig = field(default_factory=EngineLogsConfig)


# ---- parsing ------------------------------------------------------------------------------
Parser = Callable[[Any, str], Any]


def _bool(raw: Any, path: str) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(path, f"expected true or false, got {raw!r}")
    return raw


def _number(minimum: float = 0.0) -> Parser:
    def parse(raw: Any, path: str) -> float:
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
            raise ConfigError(path, f"expected a number, got {raw!r}")
        _at_least(raw, minimum, path)
        value: float = raw
        return value

    return parse


def _whole(minimum: int) -> Parser:
    """A whole number, kept an int (the core compiled refuses a float for an int field)."""

    def parse(raw: Any, path: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ConfigError(path, f"expected a whole number, got {raw!r}")
        _at_least(raw, minimum, path)
        return raw

    return parse


def _at_least(raw: float, minimum: float, path: str) -> None:
    if raw < minimum:
        word = "negative" if minimum == 0 else f"below {minimum:g}"
        raise ConfigError(path, f"must not be {word}, got {raw!r}")


def _fraction(raw: Any, path: str) -> float:
    value = float(_number()(raw, path))
    if not 0.5 <= value <= 1.0:
        raise ConfigError(path, f"expected a quantile from 0.5 to 1, got {raw!r}")
    return value


def _share(raw: Any, path: str) -> float:
    value = float(_number()(raw, path))
    if not 0.0 < value <= 1.0:
        raise ConfigError(path, f"expected a share above 0 and at most 1, got {raw!r}")
    return value


def _selector(raw: Any, path: str) -> Selector:
    try:
        return parse_selector(raw)
    except SelectorError as exc:
        raise ConfigError(path, f"bad label selector: {exc}") from None


def _str(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ConfigError(path, f"expected a non-empty string, got {raw!r}")
    return raw


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(raw: Any, path: str) -> str:
        if raw not in choices:
            raise ConfigError(path, f"expected one of {', '.join(choices)}, got {raw!r}")
        return str(raw)

    return parse


_init_action = _choice(INIT_ACTIONS)


def _strings(raw: Any, path: str) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of strings, got {raw!r}")
    return tuple(_str(v, f"{path}[{i}]") for i, v in enumerate(raw))


def _budgets(raw: Any, path: str) -> dict[str, float]:
    section = _mapping(raw, path)
    out = {}
    for phase, value in section.items():
        if phase not in BUDGET_PHASES:
            raise ConfigError(
                f"{path}.{phase}", f"unknown phase; known: {', '.join(BUDGET_PHASES)}"
            )
        out[phase] = float(_number(1.0)(value, f"{path}.{phase}"))
    return out


def _phases(raw: Any, path: str) -> tuple[str, ...]:
    phases = _strings(raw, path)
    for i, phase in enumerate(phases):
        if phase not in BUDGET_PHASES:
            raise ConfigError(f"{path}[{i}]", f"unknown phase; known: {', '.join(BUDGET_PHASES)}")
    return phases


# A model's own expected cold start, beside its phase budgets: what its first pods are held to
# (min_age, and the least a phase it has no history of gets) until one of its cold starts is
# learned, where the fleet-wide `expected_cold_start_s` would hold a fast model's first wave
# ten minutes.
MODEL_COLD_START = "expected_cold_start_s"


def _models(raw: Any, path: str) -> dict[str, dict[str, float]]:
    out = {}
    for model, value in _mapping(raw, path).items():
        section = dict(_mapping(value, f"{path}.{model}"))
        for key in section:
            if key not in BUDGET_PHASES and key != MODEL_COLD_START:
                known = ", ".join((*BUDGET_PHASES, MODEL_COLD_START))
                raise ConfigError(f"{path}.{model}.{key}", f"unknown phase; known: {known}")
        cold = section.pop(MODEL_COLD_START, None)
        out[model] = _budgets(section, f"{path}.{model}")
        if cold is not None:
            out[model][MODEL_COLD_START] = float(
                _number(1.0)(cold, f"{path}.{model}.{MODEL_COLD_START}")
            )
    return out


def _section(cls: type[Any], parsers: Mapping[str, Parser]) -> Parser:
    def parse(raw: Any, path: str) -> Any:
        if raw is None:
            return cls()
        kwargs = {}
        for key, value in _mapping(raw, path).items():
            if key not in parsers:
                known = ", ".join(parsers)
                raise ConfigError(f"{path}.{key}", f"unknown key; known: {known}")
            kwargs[key] = parsers[key](value, f"{path}.{key}")
        if "budgets" in kwargs:  # a partial budgets map overrides only the phases it names
            kwargs["budgets"] = {**cls().budgets, **kwargs["budgets"]}
        return cls(**kwargs)

    return parse


def _mapping(raw: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(path, f"expected a mapping, got {type(raw).__name__}")
    return raw


_ADAPTIVE = _section(
    AdaptiveConfig,
    {
        "enabled": _bool,
        "factor": _number(1.0),
        "min_samples": _whole(1),
        "min_siblings": _whole(1),
        "window": _whole(1),
        "lower": _phases,
        "lower_floor_s": _number(1.0),
    },
)
_PROGRESS = _section(
    ProgressConfig,
    {
        "enabled": _bool,
        "factor": _number(1.0),
        "quantile": _fraction,
        "floor_s": _number(),
        "min_samples": _whole(1),
    },
)
_HEDGE = _section(
    HedgeConfig,
    {
        "enabled": _bool,
        "at": _share,
        "gpu_short_s": _number(),
        "timeout_s": _number(1.0),
        "leave_to_race": _bool,
    },  # fmt: skip
)


def _asked(raw: Any, section: str) -> bool:
    """Whether the policy file turns `section` on by name (`enabled: true` written out):
    on by default, hedging goes off with `progress` unsaid; asked for, it needs it."""
    part = raw.get(section) if isinstance(raw, dict) else None
    return isinstance(part, dict) and part.get("enabled") is True


def _stuck_pod(parse: Parser) -> Parser:
    """The section, and what its parts need of each other."""

    def checked(raw: Any, path: str) -> StuckPodConfig:
        cfg: StuckPodConfig = parse(raw, path)
        if _asked(raw, "hedge") and not cfg.progress.enabled:
            raise ConfigError(
                f"{path}.hedge.enabled",
                f"a hedge starts when vLLM's steps show a stall: set {path}.progress.enabled "
                "(and engine_logs.follow) too",
            )
        if cfg.hedge.timeout_s > MAX_HEDGE_S:
            raise ConfigError(
                f"{path}.hedge.timeout_s",
                f"at most {MAX_HEDGE_S:.0f}s (the hedge-stalled-pod workflow's deadline leaves "
                f"room for that), got {cfg.hedge.timeout_s:g}",
            )
        return cfg

    return checked


_SECTIONS: dict[str, Parser] = {
    "stuck_pod": _stuck_pod(
        _section(
            StuckPodConfig,
            {
                "enabled": _bool,
                "selector": _selector,
                "namespaces": _strings,
                "budgets": _budgets,
                "checks": _whole(1),
                "check_interval_s": _number(),
                "models": _models,
                "adaptive": _ADAPTIVE,
                "progress": _PROGRESS,
                "hedge": _HEDGE,
                "expected_cold_start_s": _number(),
                "engine_containers": _strings,
                "init_action": _init_action,
            },
        )
    ),
    "image_update": _section(
        ImageUpdateConfig,
        {
            "enabled": _bool,
            "selector": _selector,
            "warmup_namespace": _str,
            "warmup_daemonset": _str,
            "rollout_timeout_s": _number(1.0),
            "mixed_gpus": _choice(MIXED_GPUS),
        },
    ),
    "gpu_memory": _section(
        GpuMemoryConfig,
        {
            "cordon": _bool,
            "samples": _whole(2),
            "interval_s": _number(),
            "max_spread_mib": _number(),
        },
    ),
    "alerts": _section(AlertsConfig, {"stuck_pod": _strings, "gpu_memory": _strings}),
    "first_token_probe": _section(
        FirstTokenProbeConfig,
        {
            "enabled": _bool,
            "port": _whole(1),
            "path": _str,
            "model": _str,
            "timeout_s": _number(0.1),
            "max_concurrent": _whole(1),
            "attempts": _whole(1),
            "retry_s": _number(),
        },
    ),
    "engine_logs": _section(
        EngineLogsConfig,
        {
            "follow": _bool,
            "max_pods": _whole(1),
            "max_bytes": _whole(1024),
        },
    ),
}
SECTIONS = tuple(_SECTIONS)


def parse_policy(doc: Mapping[str, Any], known: str) -> PolicyConfig:
    """The rules' sections of a parsed policy document; `known` names every top-level
    section the file may have, for the error on an unknown one."""
    kwargs = {}
    for key, value in doc.items():
        if key not in _SECTIONS:
            raise ConfigError(key, f"unknown section; known: {known}")
        kwargs[key] = _SECTIONS[key](value, key)
    return PolicyConfig(**kwargs)
