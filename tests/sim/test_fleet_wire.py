"""What the fleet simulator emits parses like real cluster output: each record it feeds the
core equals what the core's own decoder makes of the JSON the simulator writes for it, the
JSON is valid Kubernetes (kubernetes-validate, v1.31 schemas), and a run fed through the
decoder decides exactly what the fast path decides."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import kubernetes_validate
import orjson

from remediator.contract.decision import Decision
from remediator.inputs.decode import decode
from remediator.inputs.pods import spec_info
from remediator.inputs.records import Input, PodSeen
from remediator.policy_file import PolicyFile, load_policy
from remediator.replay import run_replay
from remediator.session import Session
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from remediator.sim.fleet.simulation import Simulation

SCENARIO = Scenario(
    name="wire", profile="tuned", duration_s=3600, seeds=(5,), node_count=6, gpus_per_node=8,
    deployments=(DeploymentSpec("vllm-llama-70b", "meta-llama/Llama-3.1-70B-Instruct", 8),),
    scale=ScaleLoad(600, 4, 16), rollout_every_s=1800,
    faults=Faults(engine_init_hang=0.1, registry_fail=0.1, unsettled_gpu_nodes=1),
)  # fmt: skip


# Progress-aware detection on, its follower bounded to 4 logs at once (late follows read a
# log from its first line): the engine's step lines go both ways too.
POLICY = """
stuck_pod:
  progress: {enabled: true, floor_s: 15}
engine_logs: {follow: true, max_pods: 4}
"""


def _policy() -> PolicyFile:
    return load_policy(POLICY)


@dataclass
class Recorder:
    """A controller that keeps every input and passes it to the real core."""

    name: str = "recorder"
    wants_inputs: bool = True
    seen: list[Input] = field(default_factory=list)
    decided: list[Decision] = field(default_factory=list)
    core: CorePolicy = field(default_factory=lambda: CorePolicy("progress", _policy()))

    @property
    def follows_logs(self) -> int:
        return self.core.follows_logs

    def feed(self, item: Input) -> None:
        self.seen.append(item)
        self.core.feed(item)

    def advance(self, now: float) -> None:
        self.core.advance(now)

    def take(self) -> list[Decision]:
        out = self.core.take()
        self.decided.extend(out)
        return out

    def applied(self, decision: Decision) -> None:
        self.core.applied(decision)

    def held(self) -> int:
        return self.core.held()

    def next_due(self) -> float | None:
        return self.core.next_due()


def _comparable(item: Input) -> object:
    if isinstance(item, PodSeen):
        fields = {f: getattr(item, f) for f in item.__struct_fields__ if f != "spec"}
        return type(item).__name__, fields, spec_info(item.spec, item.labels)
    return item


def test_records_equal_the_decoded_json_and_decide_the_same() -> None:
    fast, slow = Recorder(), Recorder()
    stream = io.BytesIO()
    a = Simulation(SCENARIO, 5, fast, record=stream).run()  # type: ignore[arg-type]
    b = Simulation(SCENARIO, 5, slow, wire_json=True).run()  # type: ignore[arg-type]
    assert len(fast.seen) == len(slow.seen) > 300
    for x, y in zip(fast.seen, slow.seen, strict=True):
        assert _comparable(x) == _comparable(y)
    assert a.actions == b.actions and a.ready_s == b.ready_s and a.deletions == b.deletions
    kinds = {type(i).__name__ for i in fast.seen}
    assert {"PodSeen", "PodEvent", "FirstToken", "WorkloadSeen", "AlertSeen", "EngineStep"} <= kinds
    assert any("stalled in vLLM step" in d.reason for d in fast.decided)
    assert a.actions["delete-pod"] > 0 and a.actions["verify-gpu-memory"] == 1

    lines = stream.getvalue().splitlines()
    assert sum(len(decode(line)) for line in lines) == len(fast.seen)


def test_emitted_objects_are_valid_kubernetes() -> None:
    stream = io.BytesIO()
    Simulation(SCENARIO, 5, Recorder(), record=stream).run()  # type: ignore[arg-type]
    shapes = set()
    for line in stream.getvalue().splitlines():
        doc = orjson.loads(line)
        obj = doc.get("object")
        if obj is None:
            continue
        shape = (obj["kind"], obj.get("reason"), doc["type"], obj.get("status", {}).get("phase"))
        if shape not in shapes:
            shapes.add(shape)
            kubernetes_validate.validate(obj, "1.31", strict=True)
    kinds = {s[0] for s in shapes}
    assert kinds == {"Pod", "Event", "Deployment"}
    assert {s[1] for s in shapes} >= {"Pulling", "Pulled", "Failed"}
    assert {s[2] for s in shapes} == {"ADDED", "MODIFIED", "DELETED"}


def test_a_recorded_run_replays_through_remediator_replay(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "run.jsonl"
    with path.open("wb") as stream:
        recorder = Recorder()
        result = Simulation(SCENARIO, 5, recorder, record=stream).run()  # type: ignore[arg-type]

    @dataclass
    class Out:
        decided: list[Decision] = field(default_factory=list)

        def transition(self, change: object) -> None: ...
        def decision(self, d: Decision) -> None:
            self.decided.append(d)

        def suppressed(self, s: object) -> None: ...
        def ignored(self, i: object) -> None: ...
        def error(self, where: str, message: str) -> None:
            raise AssertionError(f"{where}: {message}")

        def finish(self, *args: object) -> None: ...

    out = Out()
    # To where the live core's clock went (a timer may fire after the last input).
    end = recorder.core.session.now
    stats = run_replay([str(path)], Session(_policy()), out, until=end)  # type: ignore[arg-type]
    assert not stats.skipped
    # Replay has no executor: deleted pods stay until the recorded DELETED, as in the run.
    # One difference is the watch's: the run's core hears a pod's DELETED a moment after the
    # API server stamped it (whole seconds), and may decide about the pod meanwhile (a hedge
    # won by its hedge pod, the hung pod judged in the same second: its delete finds it gone).
    # Replay applies the DELETED at its stamp, before that timer. Every other deletion is
    # the same, and there are many (the unsettled node is cordoned at its verdict: before
    # cordoning was the default, its pods' turnover made over a hundred).
    live = [(d.target, d.at) for d in recorder.decided if d.action == "delete-pod"]
    replayed = {d.target for d in out.decided if d.action == "delete-pod"}
    assert len(live) == result.actions["delete-pod"] and replayed <= {t for t, _ in live}
    gone = {p.name: p.at for p in recorder.seen if isinstance(p, PodSeen) and p.watch == "DELETED"}
    late = [(t, at) for t, at in live if t not in replayed]
    assert all(t in gone and gone[t] <= at for t, at in late), late
    assert len(replayed) >= len(live) - 2 and len(live) >= 10
