"""`remediator simulate --tail N`: the slowest replicas of a run, told pod by pod from the
simulator's ground truth (where a pod hung) and what the core said (decided, held)."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from remediator.cli import main
from remediator.policy_file import PolicyFile
from remediator.sim.fleet.compare import PolicySpec, run_policy, slowest
from remediator.sim.fleet.controllers import CorePolicy
from remediator.sim.fleet.results import pct
from remediator.sim.fleet.scenario import DeploymentSpec, Faults, ScaleLoad, Scenario
from remediator.sim.fleet.tail import LATE_READ_S, PodStory, ReplicaStory, causes, render
from tests.sim.test_fleet_cli import SMALL

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
# Every fifth pod hangs, and the first three: hung pods from the fleet's first wave on, before
# its cold starts have paid for any hedge (the hedge budget holds those).
FLEET = Scenario(
    name="tail", profile="tuned", duration_s=2 * 3600, seeds=(3, 4), node_count=8,
    gpus_per_node=8, scale=ScaleLoad(600, 4, 16),
    faults=Faults(engine_init_hang=0.2, hang_first=3),
    deployments=(DeploymentSpec("vllm-llama-70b", MODEL, 8),),
)  # fmt: skip


def _told(n: int) -> tuple[list[float], list[ReplicaStory]]:
    runs = run_policy(FLEET, PolicySpec("default", lambda: CorePolicy("default", PolicyFile())),
                      tail=n)  # fmt: skip
    return [v for r in runs for v in r.ready_s], slowest(runs, n)


def test_the_slowest_replicas_are_told_slowest_first_with_their_pods_in_order() -> None:
    ready, told = _told(5)
    assert len(told) == 5
    times = [r.ready_s for r in told]
    assert times == sorted(times, reverse=True)
    assert times[0] == max(ready)  # the run's own slowest replica, to the second
    for r in told:
        created = [p.created for p in r.pods]
        assert created == sorted(created) and created[0] == 0.0


def test_a_hung_pod_is_told_where_it_hung_what_was_decided_and_how_it_ended() -> None:
    _, told = _told(5)
    hung = [p for r in told for p in r.pods if p.hung is not None]
    assert hung, "the slowest replicas of a fleet with 20% hangs have a hung pod"
    pod = hung[0]
    assert any(w in pod.hung for w in ("NCCL init", "torch.compile", "CUDA graph", "driver"))
    said = [what for _, what in pod.said]
    assert any(s.startswith(("delete-pod decided", "hedge-pod decided")) for s in said)
    assert pod.ended is not None and pod.removed_by in ("remediation", "hedge")
    times = [at for at, _ in pod.said]
    assert times == sorted(times)


def test_what_a_guardrail_held_is_told_with_the_pod() -> None:
    """The first wave's hedges: nothing has paid for them yet."""
    _, told = _told(10)
    held = [w for r in told for p in r.pods for _, w in p.said if w.startswith("held ")]
    assert any(w.startswith("held hedge-pod by hedge_budget: hedge budget") for w in held), held


def _pod(
    hung: str | None = None,
    log_read: float | None = 10.0,
    pulled_s: float | None = None,
    said: tuple[tuple[float, str], ...] = (),
) -> PodStory:
    return PodStory("p", False, 0.0, 1.0, pulled_s, 10.0, log_read, hung, None, None, None,
                    said)  # fmt: skip


def _replica(*pods: PodStory, censored: bool = False) -> ReplicaStory:
    return ReplicaStory(1, "d", 0.0, 100.0, censored, False, pods)


def test_causes_say_what_the_story_shows() -> None:
    assert causes(_replica(_pod(), _pod())) == []
    assert causes(_replica(_pod("NCCL init from +12s"), _pod())) == ["hung"]
    late = _pod("NCCL init from +12s", log_read=10.0 + LATE_READ_S + 1)
    assert causes(_replica(late, _pod())) == ["hung", "log read late"]
    on_time = _pod("NCCL init from +12s", log_read=10.0 + LATE_READ_S)
    assert causes(_replica(on_time, _pod())) == ["hung"]
    assert causes(_replica(_pod("x", log_read=None), _pod("y"))) == ["hung again", "log never read"]
    held = _pod(
        "x",
        said=(
            (20.0, "held hedge-pod by hedge_budget: hedge budget: ..."),
            (30.0, "the hedge's step refused: its Deployment is rolling out"),
        ),
    )
    assert causes(_replica(held, _pod(pulled_s=90.0), censored=True)) == [
        "hung", "hedge held by hedge_budget", "replacement pulled its image", "never Ready",
    ]  # fmt: skip
    rolling = _pod("x", said=((20.0, "no hedge: ns/Deployment/d is rolling out (...)"),))
    assert causes(_replica(rolling)) == ["hung", "no hedge mid-rollout"]
    capped = _pod("x", said=(
        (20.0, "held delete-pod by blast_radius: blast radius: 1 pod deletion(s) ..."),
        (50.0, "held delete-pod by blast_radius: blast radius: 1 pod deletion(s) ..."),
        (80.0, "held delete-pod by rate_limit: rate limit: 6/min ..."),
    ))  # fmt: skip
    assert causes(_replica(capped)) == [
        "hung",
        "deletion held by blast_radius",
        "deletion held by rate_limit",
    ]


def test_render_names_the_replica_and_each_pod() -> None:
    ready, told = _told(2)
    text = render("default", told, len(ready), pct(ready, 99))
    assert text.startswith(f"default: the 2 slowest of {len(ready)} replicas (P99 ")
    assert "\n  why: " in text
    assert "vllm-llama-70b, seed " in text and "    pod 1: created +0s" in text


def test_simulate_tail_prints_and_writes_json(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    args = ["simulate", str(scenario), "--out", str(tmp_path), "--tail", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "\ndefault: the 2 slowest of " in result.output
    assert "\nseed-rule: the 2 slowest of " in result.output  # its decisions are told too
    result = CliRunner().invoke(main, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    docs = {d["policy"]: d for d in map(orjson.loads, result.output.splitlines())}
    assert len(docs["default"]["tail"]) == 2
    assert docs["default"]["tail"][0]["pods"][0]["created"] == 0.0


def test_simulate_tail_is_a_count() -> None:
    result = CliRunner().invoke(main, ["simulate", "examples/sim/tuned.yaml", "--tail", "-1"])
    assert result.exit_code == 2
    assert "--tail" in result.output
