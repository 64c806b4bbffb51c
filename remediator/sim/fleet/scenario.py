"""A simulation scenario (YAML), parsed strictly: unknown keys and bad values are refused
with the dotted path of the offending key.

    name: tuned-hangs-5
    profile: tuned               # phase calibration: tuned | untuned
    duration_s: 21600            # virtual seconds simulated per seed
    seeds: [1, 2, 3]
    nodes: {count: 32, gpus: 8}
    deployments:
      - {name: vllm-llama-70b, model: meta-llama/Llama-3.1-70B-Instruct, replicas: 8}
    load:
      scale: {every_s: 900, low: 8, high: 24}   # the autoscaler alternates: scale-ups
      rollout_every_s: 7200                       # image rollouts (every pod cold-starts)
    faults:
      engine_init_hang: 0.05     # share of cold starts whose engine init never finishes
      driver_hang: 0.0           # share whose container never starts (GPU driver hang)
      registry: {slow: 1.0, fail: 0.0}   # pull time factor; share of pulls that fail once
      gpu_shortage: {at: 3600, nodes: 8, for_s: 1800}   # nodes lost for a while
      unsettled_gpu_nodes: 0     # nodes whose GPU memory never settles (engine init hangs)
      slow_gpu_nodes: {count: 0, factor: 2.5}   # nodes whose engine inits run `factor` × slower
      hang_first: 0              # the first N pods created hang in engine init, whatever the seed
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from remediator.sim.fleet.calibration import PROFILES

# The example fleets (examples/sim): the bench's and the defaults' scenarios.
EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "sim"


NODE_SCORINGS = ("spread", "pack")


class ScenarioError(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class DeploymentSpec:
    name: str
    model: str
    replicas: int
    tp: int = 2
    namespace: str = "inference"
    image: str = "vllm/vllm-openai:v0.6.4.post1"


@dataclass(frozen=True, slots=True)
class ScaleLoad:
    every_s: float
    low: int
    high: int


@dataclass(frozen=True, slots=True)
class Shortage:
    at: float
    nodes: int
    for_s: float


@dataclass(frozen=True, slots=True)
class Faults:
    engine_init_hang: float = 0.0
    driver_hang: float = 0.0
    registry_slow: float = 1.0
    registry_fail: float = 0.0
    gpu_shortage: Shortage | None = None
    unsettled_gpu_nodes: int = 0
    # Healthy but slow nodes (a throttled or degraded GPU, a slow local disk, a PCIe link
    # trained down): every engine init there takes `slow_gpu_factor` times as long, step by
    # step. The last `slow_gpu_nodes` nodes, so never an unsettled one where both fit.
    slow_gpu_nodes: int = 0
    slow_gpu_factor: float = 2.5
    hang_first: int = 0  # the first N pods created hang in engine init (a fault placed exactly)


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    profile: str
    duration_s: float
    seeds: tuple[int, ...]
    node_count: int
    gpus_per_node: int
    deployments: tuple[DeploymentSpec, ...]
    scale: ScaleLoad | None = None
    rollout_every_s: float | None = None
    faults: Faults = field(default_factory=Faults)
    executor_delay_s: float = 5.0  # decision → the workflow's step acting on the cluster
    # How kube-scheduler scores the free GPUs of a node, after the image there: "spread" is
    # its default (NodeResourcesFit LeastAllocated: the emptiest node), "pack" the
    # MostAllocated scoring of nvidia.com/gpu that GPU clusters configure to keep whole
    # nodes free for pods that need one.
    node_scoring: str = "spread"

    def with_faults(self, **changes: Any) -> Scenario:
        from dataclasses import replace

        return replace(self, faults=replace(self.faults, **changes))


def no_spare(base: Scenario) -> Scenario:
    """The fleet with GPUs for its peak and no more: at the peak of a scale-up, with a
    rollout's surge (maxSurge 25%) on top, every GPU is taken."""
    gpus = 0
    for dep in base.deployments:
        peak = max(dep.replicas, base.scale.high if base.scale is not None else 0)
        gpus += (peak + -(-peak // 4)) * dep.tp
    nodes = -(-gpus // base.gpus_per_node)
    return replace(base, name=f"{base.name} no spare", node_count=nodes)


def load_scenario(path: str | Path) -> Scenario:
    text = Path(path).read_text(encoding="utf-8")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScenarioError(str(path), f"not valid YAML: {exc}") from None
    return parse_scenario(doc, Path(path).stem)


def parse_scenario(doc: Any, default_name: str = "scenario") -> Scenario:
    top = _map(doc, "scenario")
    _known(top, "scenario", {"name", "profile", "duration_s", "seeds", "nodes", "deployments",
                             "load", "faults", "executor_delay_s"})  # fmt: skip
    profile = _str(top.get("profile", "tuned"), "profile")
    if profile not in PROFILES:
        raise ScenarioError("profile", f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    nodes = _map(top.get("nodes", {}), "nodes")
    _known(nodes, "nodes", {"count", "gpus", "scoring"})
    scoring = _str(nodes.get("scoring", "spread"), "nodes.scoring")
    if scoring not in NODE_SCORINGS:
        raise ScenarioError(
            "nodes.scoring",
            f"unknown scoring {scoring!r}; known: spread (kube-scheduler's default, the "
            "emptiest node first), pack (MostAllocated on nvidia.com/gpu, the fullest first)",
        )
    seeds = top.get("seeds", [1])
    if not isinstance(seeds, list) or not seeds:
        raise ScenarioError("seeds", f"expected a non-empty list of whole numbers, got {seeds!r}")
    load = _map(top.get("load") or {}, "load")
    _known(load, "load", {"scale", "rollout_every_s"})
    deps = top.get("deployments")
    if not isinstance(deps, list) or not deps:
        raise ScenarioError("deployments", "expected a non-empty list of deployments")
    return Scenario(
        name=_str(top.get("name", default_name), "name"),
        profile=profile,
        duration_s=_num(top.get("duration_s", 3600), "duration_s", 1),
        seeds=tuple(int(_num(s, f"seeds[{i}]", 0, whole=True)) for i, s in enumerate(seeds)),
        node_count=int(_num(nodes.get("count", 8), "nodes.count", 1, whole=True)),
        gpus_per_node=int(_num(nodes.get("gpus", 8), "nodes.gpus", 1, whole=True)),
        deployments=tuple(_deployment(d, f"deployments[{i}]") for i, d in enumerate(deps)),
        scale=_scale(load["scale"]) if load.get("scale") is not None else None,
        rollout_every_s=(
            _num(load["rollout_every_s"], "load.rollout_every_s", 1)
            if load.get("rollout_every_s") is not None
            else None
        ),
        faults=_faults(top.get("faults")),
        executor_delay_s=_num(top.get("executor_delay_s", 5.0), "executor_delay_s", 0),
        node_scoring=scoring,
    )


def _deployment(raw: Any, path: str) -> DeploymentSpec:
    d = _map(raw, path)
    _known(d, path, {"name", "model", "replicas", "tp", "namespace", "image"})
    base = DeploymentSpec("", "", 0)
    return DeploymentSpec(
        name=_str(d.get("name"), f"{path}.name"),
        model=_str(d.get("model"), f"{path}.model"),
        replicas=int(_num(d.get("replicas", 1), f"{path}.replicas", 0, whole=True)),
        tp=int(_num(d.get("tp", base.tp), f"{path}.tp", 1, whole=True)),
        namespace=_str(d.get("namespace", base.namespace), f"{path}.namespace"),
        image=_str(d.get("image", base.image), f"{path}.image"),
    )


def _scale(raw: Any) -> ScaleLoad:
    s = _map(raw, "load.scale")
    _known(s, "load.scale", {"every_s", "low", "high"})
    low = int(_num(s.get("low", 1), "load.scale.low", 0, whole=True))
    high = int(_num(s.get("high", low), "load.scale.high", low, whole=True))
    return ScaleLoad(_num(s.get("every_s", 900), "load.scale.every_s", 1), low, high)


def _faults(raw: Any) -> Faults:
    f = _map(raw or {}, "faults")
    _known(f, "faults", {"engine_init_hang", "driver_hang", "registry", "gpu_shortage",
                         "unsettled_gpu_nodes", "slow_gpu_nodes", "hang_first"})  # fmt: skip
    reg = _map(f.get("registry") or {}, "faults.registry")
    _known(reg, "faults.registry", {"slow", "fail"})
    shortage = None
    if f.get("gpu_shortage") is not None:
        g = _map(f["gpu_shortage"], "faults.gpu_shortage")
        _known(g, "faults.gpu_shortage", {"at", "nodes", "for_s"})
        shortage = Shortage(
            at=_num(g.get("at", 0), "faults.gpu_shortage.at", 0),
            nodes=int(_num(g.get("nodes", 1), "faults.gpu_shortage.nodes", 1, whole=True)),
            for_s=_num(g.get("for_s", 600), "faults.gpu_shortage.for_s", 1),
        )
    slow = _map(f.get("slow_gpu_nodes") or {}, "faults.slow_gpu_nodes")
    _known(slow, "faults.slow_gpu_nodes", {"count", "factor"})
    return Faults(
        engine_init_hang=_share(f.get("engine_init_hang", 0.0), "faults.engine_init_hang"),
        driver_hang=_share(f.get("driver_hang", 0.0), "faults.driver_hang"),
        registry_slow=_num(reg.get("slow", 1.0), "faults.registry.slow", 0.01),
        registry_fail=_share(reg.get("fail", 0.0), "faults.registry.fail"),
        gpu_shortage=shortage,
        unsettled_gpu_nodes=int(
            _num(f.get("unsettled_gpu_nodes", 0), "faults.unsettled_gpu_nodes", 0, whole=True)
        ),
        slow_gpu_nodes=int(
            _num(slow.get("count", 0), "faults.slow_gpu_nodes.count", 0, whole=True)
        ),
        slow_gpu_factor=_num(slow.get("factor", 2.5), "faults.slow_gpu_nodes.factor", 1),
        hang_first=int(_num(f.get("hang_first", 0), "faults.hang_first", 0, whole=True)),
    )


def _map(raw: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ScenarioError(path, f"expected a mapping, got {type(raw).__name__}")
    return raw


def _known(m: Mapping[str, Any], path: str, keys: set[str]) -> None:
    for key in m:
        if key not in keys:
            raise ScenarioError(f"{path}.{key}", f"unknown key; known: {', '.join(sorted(keys))}")


def _str(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ScenarioError(path, f"expected a non-empty string, got {raw!r}")
    return raw


def _num(raw: Any, path: str, minimum: float, whole: bool = False) -> float:
    ok = isinstance(raw, int) if whole else isinstance(raw, int | float)
    if isinstance(raw, bool) or not ok or not math.isfinite(raw):
        raise ScenarioError(path, f"expected {'a whole number' if whole else 'a number'}, "
                                  f"got {raw!r}")  # fmt: skip
    if raw < minimum:
        raise ScenarioError(path, f"must be at least {minimum:g}, got {raw!r}")
    return float(raw)


def _share(raw: Any, path: str) -> float:
    value = _num(raw, path, 0)
    if value > 1:
        raise ScenarioError(path, f"a share is between 0 and 1, got {raw!r}")
    return value
