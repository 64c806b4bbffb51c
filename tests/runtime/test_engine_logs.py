"""Following pods/log while a pod is in engine init, against the kube API stand-in (no kubelet
runs here, so the stand-in keeps the log): real vLLM lines become engine-init steps."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from remediator.inputs.timefmt import parse_time
from remediator.runtime.service import ServiceConfig
from remediator.sources.engine_logs import in_engine_init
from tests.data import vllm_logs
from tests.runtime.conftest import NS, iso, running, stuck_pod, wait_until
from tests.standins.kube_api import KubeApiServer

POLICY = """
stuck_pod:
  selector: app=vllm-inference
  namespaces: [llm]
  budgets: {engine_init: 3600}
engine_logs: {follow: true, max_pods: %d, max_bytes: %d}
"""


def policy(tmp_path: Path, max_pods: int = 8, max_bytes: int = 1 << 20) -> str:
    path = tmp_path / "logs-policy.yaml"
    path.write_text(POLICY % (max_pods, max_bytes))
    return str(path)


def with_sidecar(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["containers"].insert(0, {"name": "metrics", "image": "busybox"})
    return pod


def real(name: str, needle: str) -> str:
    return next(ln for ln in vllm_logs.lines(name) if needle in ln)


def steps(service: Any, pod: str) -> dict[str, float]:
    t = service.session.tracker.current(NS, pod)
    return t.engine_steps() if t is not None else {}


async def test_steps_are_read_from_the_log_while_in_engine_init(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    pod = kube.store.create(with_sidecar(stuck_pod("vllm-0", started_ago_s=100)))
    started = parse_time(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    logs = kube.logs
    for at, line in [
        (started + 5, "INFO:     Started server process [1]"),
        (started + 40, real("2025-11-v1-engine.log", "Model loading took")),
        (started + 48, real("2025-11-v1-engine.log", "Dynamo bytecode")),
        (started + 60, real("2025-11-v1-engine.log", "torch.compile takes")),
        (started + 61, real("2025-11-v1-engine.log", "Available KV cache")),
        (started + 62, real("2025-11-v1-engine.log", "GPU KV cache size")),
    ]:
        logs.write(NS, "vllm-0", "vllm", line, at)
    cfg = replace(config, policy=policy(tmp_path))
    async with running(cfg) as service:
        await wait_until(lambda: "memory_profiling" in steps(service, "vllm-0"), what="steps")
        t = service.session.tracker.current(NS, "vllm-0")
        assert t is not None and t.engine_step() == "kv_cache"  # stalled there so far
        # the follow is live: a line written now arrives
        logs.write(NS, "vllm-0", "vllm", real("2025-06-v1-api-server.log", "Graph capturing"))
        await wait_until(lambda: "cuda_graphs" in steps(service, "vllm-0"), what="live line")
        follower = service.observers.follower
        assert follower is not None and follower.following() == ["llm/vllm-0"]
        # Ready: the follower lets go at once
        ready = dict(pod)
        ready["status"]["conditions"][1].update(status="True", lastTransitionTime=iso(time.time()))
        kube.store.update(kube.resource("v1", "pods"), NS, "vllm-0", ready, False)
        await wait_until(lambda: follower.following() == [], what="let go")
        got = steps(service, "vllm-0")
        read = service.registry.get_sample_value("remediator_engine_log_bytes_total")
    assert [round(got[k]) for k in ("weights", "torch_compile", "memory_profiling")] == [40, 20, 2]
    assert "kv_cache" not in got  # V1: timed with cuda_graphs, which no line here ends
    (req,) = kube.sent("GET", "/pods/vllm-0/log")
    assert req.query == {
        "container": ["vllm"],
        "follow": ["true"],
        "timestamps": ["true"],
        "limitBytes": [str(1 << 20)],
    }
    assert read == kube.logs.bytes_sent > 0


async def test_at_most_max_pods_and_max_bytes(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    for name in ("vllm-0", "vllm-1"):
        kube.store.create(stuck_pod(name, started_ago_s=100))
    filler = real("2025-04-kubelet-timestamps.log", "Starting Startup Loop").partition(" ")[2]
    for i in range(40):  # ~4 KB of lines that mark nothing
        kube.logs.write(NS, "vllm-0", "vllm", f"{filler} {i}")
        kube.logs.write(NS, "vllm-1", "vllm", f"{filler} {i}")
    cfg = replace(config, policy=policy(tmp_path, max_pods=1, max_bytes=1024))
    async with running(cfg) as service:
        follower = service.observers.follower
        assert follower is not None
        await wait_until(lambda: len(kube.sent("GET", "/log")) >= 1, what="a follow")
        await wait_until(lambda: kube.logs.bytes_sent >= 1024, what="the byte bound")
        # one pod at a time; the first log ended at its bound and is not read again
        await wait_until(lambda: len(kube.sent("GET", "/log")) == 2, what="the second pod")
        assert {r.path for r in kube.sent("GET", "/log")} == {
            f"/api/v1/namespaces/{NS}/pods/vllm-0/log",
            f"/api/v1/namespaces/{NS}/pods/vllm-1/log",
        }
        await wait_until(lambda: kube.logs.bytes_sent >= 2048, what="second bound")
        assert len(follower.following()) <= 1
    assert kube.logs.bytes_sent == 2048  # the server stops each at limitBytes


async def test_nothing_is_followed_where_the_policy_says_not_to(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    kube.store.create(stuck_pod("vllm-0", started_ago_s=100))
    path = tmp_path / "no-follow.yaml"
    path.write_text(POLICY.replace("follow: true", "follow: false") % (8, 1 << 20))
    async with running(replace(config, policy=str(path))) as service:
        await wait_until(lambda: service.session.tracker.current(NS, "vllm-0"), what="pod")
        assert service.observers.follower is None
    assert kube.sent("GET", "/log") == []


async def test_the_default_policy_follows_logs(config: ServiceConfig, kube: KubeApiServer) -> None:
    """Progress-aware detection is on by default (docs/simulation-defaults.md): it reads the
    logs of pods in engine init."""
    kube.store.create(stuck_pod("vllm-0", started_ago_s=100))
    async with running(replace(config, policy=None)) as service:
        assert service.observers.follower is not None
        await wait_until(lambda: len(kube.sent("GET", "/log")) >= 1, what="a follow")


async def test_a_log_read_to_its_bound_says_so_and_progress_is_not_judged_by_its_silence(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    pod = kube.store.create(stuck_pod("vllm-0", started_ago_s=100))
    started = parse_time(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    kube.logs.write(NS, "vllm-0", "vllm", real("2025-11-v1-engine.log", "Model loading"), started)
    filler = real("2025-04-kubelet-timestamps.log", "Starting Startup Loop").partition(" ")[2]
    for i in range(40):  # ~4 KB more: past the 1 KiB bound, the rest is never read
        kube.logs.write(NS, "vllm-0", "vllm", f"{filler} {i}", started + 1)
    cfg = replace(config, policy=policy(tmp_path, max_bytes=1024))
    async with running(cfg) as service:

        def ended() -> bool:
            t = service.session.tracker.current(NS, "vllm-0")
            return t is not None and t.engine is not None and "log_ended" in t.engine.seen

        await wait_until(ended, what="the end of the log said")
        t = service.session.tracker.current(NS, "vllm-0")
        assert t is not None and t.engine is not None
        assert t.engine.seen["log_ended"] == t.engine.seen["weights"]  # at the last step line


async def test_a_pod_the_core_would_judge_unread_is_followed_beyond_the_bound(
    config: ServiceConfig, kube: KubeApiServer, tmp_path: Path
) -> None:
    """max_pods 1 and two pods in engine init: the older is followed; the other, which the
    core asks for before judging it on its budget alone (`PolicyEngine.logs_wanted`), is
    followed too, up to the bound again beyond it."""
    for name, ago in (("vllm-0", 200), ("vllm-1", 100), ("vllm-2", 50)):
        kube.store.create(stuck_pod(name, started_ago_s=ago))
    cfg = replace(config, policy=policy(tmp_path, max_pods=1))
    async with running(cfg) as service:
        follower = service.observers.follower
        assert follower is not None
        await wait_until(lambda: follower.following() == [f"{NS}/vllm-0"], what="the oldest")
        tracker, selected = service.session.tracker, service.session.engine.selected
        uid = {t.name: t.uid for t in in_engine_init(tracker, selected)}
        follower.sync(in_engine_init(tracker, selected), first=[uid["vllm-2"], uid["vllm-1"]])
        # one beyond the bound (1 + 1): the first asked for, not the older one
        assert sorted(follower.following()) == [f"{NS}/vllm-0", f"{NS}/vllm-2"]
        await wait_until(lambda: len(kube.sent("GET", "/log")) == 2, what="its log read")
        follower.sync(in_engine_init(tracker, selected))  # asked for no more: kept, no more
        assert sorted(follower.following()) == [f"{NS}/vllm-0", f"{NS}/vllm-2"]
