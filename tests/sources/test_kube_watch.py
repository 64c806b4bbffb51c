"""List + watch against the stand-in API server: resume, relist on 410, refuse bad objects."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client import Counter as PromCounter

from remediator.inputs.records import Input, PodSeen, Relisted
from remediator.runtime.clock import SystemClock
from remediator.runtime.service import ServiceConfig
from remediator.runtime.supervisor import Restarts, Supervisor
from remediator.sources.kube_client import api_client
from remediator.sources.kube_watch import KubeWatch, WatchSettings, WatchTarget, targets
from remediator.sources.metrics import SourceMetrics
from tests.logcheck import LogRecorder
from tests.runtime.conftest import running, stuck_pod
from tests.standins.kube_api import KubeApiServer, node, pod


def wait(check: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def wait_for_value(check: Callable[[], str | None], timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while (value := check()) is None:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
    return value


class Got:
    def __init__(self) -> None:
        self.items: list[Input] = []
        self.lock = threading.Lock()

    def __call__(self, inputs: list[Input]) -> None:
        with self.lock:
            self.items.extend(inputs)

    def pods(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(i.name, i.watch) for i in self.items if isinstance(i, PodSeen)]


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Got, KubeWatch, CollectorRegistry]]:
    with KubeApiServer() as api:
        api.bookmark_interval_s = 3600  # no bookmark moves the version under the test
        api.store.create(pod("llm", "vllm-0"))
        registry = CollectorRegistry()
        got = Got()
        client = api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        settings = WatchSettings(timeout_s=30, backoff_initial_s=0.02)
        w = KubeWatch(client, WatchTarget("Pod", "llm"), got, SourceMetrics.on(registry), settings)
        w.start()
        assert w.synced.wait(10)
        yield api, got, w, registry
        w.stop()
        w.join(5)


def test_lists_then_streams_changes_and_deletes(watching) -> None:  # type: ignore[no-untyped-def]
    api, got, _, _ = watching
    api.store.create(pod("llm", "vllm-1"))
    api.store.create(pod("other", "elsewhere"))
    res = api.resource("v1", "pods")
    api.store.delete(res, "llm", "vllm-0", {}, dry=False)
    wait(lambda: ("vllm-0", "DELETED") in got.pods())
    assert got.pods() == [("vllm-0", "ADDED"), ("vllm-1", "ADDED"), ("vllm-0", "DELETED")]
    watches = [r for r in api.sent("GET", "/pods") if r.query.get("watch")]
    assert watches[0].query["allowWatchBookmarks"] == ["true"]


def test_reconnect_resumes_from_the_last_version(watching) -> None:  # type: ignore[no-untyped-def]
    api, got, _, registry = watching
    api.store.create(pod("llm", "vllm-1"))
    wait(lambda: len(got.pods()) == 2)
    api.close_watches()
    api.store.create(pod("llm", "vllm-2"))
    wait(lambda: len(got.pods()) == 3)
    assert got.pods()[-1] == ("vllm-2", "ADDED")
    lists = [r for r in api.sent("GET", "/pods") if not r.query.get("watch")]
    assert len(lists) == 1, "a stream that ended is resumed, not relisted"


def test_410_gone_relists(watching) -> None:  # type: ignore[no-untyped-def]
    api, got, _, registry = watching
    api.store.create(node("gpu-node-9"))  # moves the version past what the pod watch saw
    api.store.compact()
    api.close_watches()
    wait(
        lambda: (
            registry.get_sample_value(
                "remediator_watch_restarts_total", {"kind": "Pod", "reason": "gone"}
            )
            == 1.0
        )
    )
    wait(lambda: got.pods().count(("vllm-0", "ADDED")) == 2)  # relisted
    lists = [r for r in api.sent("GET", "/pods") if not r.query.get("watch")]
    assert len(lists) == 2


def test_a_bad_object_is_counted_and_skipped(watching) -> None:  # type: ignore[no-untyped-def]
    api, got, _, registry = watching
    bad = pod("llm", "no-container-list")
    bad["metadata"]["uid"] = ""  # the decoder refuses a pod without uid
    api.store.objects[("v1", "pods", "llm", "x")] = bad  # seeded raw, as a broken server might
    api.store.create(pod("llm", "vllm-1"))
    wait(lambda: ("vllm-1", "ADDED") in got.pods())
    api.store.create(node("gpu-node-9"))
    api.store.compact()
    api.close_watches()  # 410, and the relist meets the bad object
    wait(
        lambda: (
            (registry.get_sample_value("remediator_input_errors_total", {"source": "kube"}) or 0)
            >= 1
        )
    )
    assert ("no-container-list", "ADDED") not in got.pods()


def test_api_errors_back_off_and_recover(watching) -> None:  # type: ignore[no-untyped-def]
    from tests.standins.kube_api import Fault

    api, got, _, registry = watching
    api.faults.append(Fault("GET", "/pods", 500, times=2))

    def errors() -> float:
        labels = {"kind": "Pod", "reason": "error"}
        return registry.get_sample_value("remediator_watch_restarts_total", labels) or 0.0

    # Close the stream (again, if the watch was not yet open the first time) until the
    # reconnects have met both injected 500s; closing mid-read may count one more.
    wait(lambda: api.close_watches() or errors() >= 2.0)
    assert not api.faults or all(f.times == 0 for f in api.faults)  # both were served
    api.store.create(pod("llm", "vllm-1"))  # after both failures: only a recovered watch sees it
    wait(lambda: ("vllm-1", "ADDED") in got.pods())


def test_targets_cover_every_kind_and_the_warmup_daemonset_by_name() -> None:
    got = targets(["a", "b"], "kube-system/gpu-warmup")
    assert {(t.kind, t.namespace) for t in got} >= {("Pod", "a"), ("Event", "b")}
    assert got[-1] == WatchTarget("DaemonSet", "kube-system", "metadata.name=gpu-warmup")
    assert len(got) == 9


def test_every_list_ends_with_what_it_held(watching) -> None:  # type: ignore[no-untyped-def]
    api, got, _, _ = watching
    res = api.resource("v1", "pods")
    first = api.store.get(res, "llm", "vllm-0")["metadata"]["uid"]
    kept = api.store.create(pod("llm", "vllm-1"))["metadata"]["uid"]
    wait(lambda: ("vllm-1", "ADDED") in got.pods())
    api.store.delete(res, "llm", "vllm-0", {}, dry=False)
    api.store.compact()  # the DELETED goes out on the open watch; the relist is what counts
    api.close_watches()
    wait(lambda: len(relists(got)) == 2)
    before, after = relists(got)
    assert (before.kind, before.namespace, before.uids) == ("Pod", "llm", frozenset({first}))
    assert after.uids == frozenset({kept}) and after.version >= before.version > 0
    assert after.selector is None
    assert after.at is not None  # the server's Date header


def relists(got: Got) -> list[Relisted]:
    with got.lock:
        return [i for i in got.items if isinstance(i, Relisted)]


# Issue 18 #5: a non-object event killed the watch thread for good (`.get` on a str), and
# nothing restarted it. No real API server sends one on request, so the stand-in sends it.
NOT_OBJECTS = [
    {"type": "MODIFIED", "object": "x"},
    {"type": "BOOKMARK", "object": None},
    {"type": "MODIFIED", "object": [1, 2]},
    {"type": "BOOKMARK", "object": {"metadata": "x"}},
    {"type": "ADDED", "object": {"kind": "Pod", "metadata": [1]}},
    [1, 2],
    "x",
    None,
]


@pytest.mark.parametrize("line", NOT_OBJECTS, ids=[str(x)[:30] for x in NOT_OBJECTS])
def test_a_non_object_event_is_counted_and_skipped(watching, line) -> None:  # type: ignore[no-untyped-def]
    api, got, w, registry = watching
    api.send_raw_event("v1", "pods", line)
    wait(
        lambda: (
            (registry.get_sample_value("remediator_input_errors_total", {"source": "kube"}) or 0)
            >= 1
        )
    )
    api.store.create(pod("llm", "vllm-after"))  # the same watch goes on
    wait(lambda: ("vllm-after", "ADDED") in got.pods())
    restarts = registry.get_sample_value(
        "remediator_watch_restarts_total", {"kind": "Pod", "reason": "error"}
    )
    assert not restarts, "skipped in the stream, not a failure of it"


async def test_a_watch_that_dies_is_restarted_by_the_supervisor(tmp_path: Path) -> None:
    """Whatever kills the watch's thread is the supervisor's to log, count and restart (with
    a relist). Here what is handed the inputs fails once, as a bug downstream would."""
    with KubeApiServer() as api:
        api.store.create(pod("llm", "vllm-0"))
        got, fails = Got(), [1]

        def deliver(inputs: list[Input]) -> None:
            if fails[0] and any(isinstance(i, PodSeen) for i in inputs):
                fails[0] -= 1
                raise RuntimeError("a bug downstream of the watch")
            got(inputs)

        registry = CollectorRegistry()
        client = api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        settings = WatchSettings(timeout_s=30, backoff_initial_s=0.02)
        target = WatchTarget("Pod", "llm")
        w = KubeWatch(client, target, deliver, SourceMetrics.on(registry), settings)
        restarts = PromCounter("t_restarts", "restarts", ["task"], registry=registry)
        supervisor = Supervisor(SystemClock(), Restarts(after_s=0.05), restarts, asyncio.Event())
        task = asyncio.create_task(supervisor.run("watch-Pod/llm", w.supervised))
        try:
            await until(lambda: ("vllm-0", "ADDED") in got.pods())
            assert registry.get_sample_value("t_restarts_total", {"task": "watch-Pod/llm"}) == 1
            api.store.create(pod("llm", "vllm-1"))  # and it watches on
            await until(lambda: ("vllm-1", "ADDED") in got.pods())
        finally:
            w.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            w.join(5)


async def until(check: Callable[[], object], timeout: float = 10.0) -> object:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
    return value


async def test_a_silent_watch_fails_readyz_until_it_speaks_again(
    config: ServiceConfig, kube: KubeApiServer, logs_at_debug: LogRecorder
) -> None:
    """A stream that says nothing, not even a BOOKMARK, for longer than the bound may be dead
    (a half-open connection): /readyz fails, once said, and recovers when it speaks."""
    watch = replace(config.watch_settings, stale_after_s=1.0)
    async with running(replace(config, watch_settings=watch)) as service:
        await until(lambda: service.runtime.ready()[0])
        kube.bookmark_interval_s = 3600  # every stream goes quiet
        await until(lambda: not service.runtime.ready()[0])
        ready, why = service.runtime.ready()
        assert "/llm silent for" in why, why  # whichever stream was found quiet first

        # Every stream is quiet, but each is found so when readiness is asked after its bound:
        # ask until all have said so (the first alone fails readiness; under load the last
        # was not yet past its bound when the streams spoke again).
        def all_said() -> bool:
            service.runtime.ready()
            return len(logs_at_debug.named("watch not current: not ready")) == len(service.watches)

        await until(all_said)
        kube.bookmark_interval_s = 0.2
        await until(lambda: service.runtime.ready()[0])
    said = logs_at_debug.named("watch not current: not ready")
    assert {x["watch"] for x in said} == {w.target.label for w in service.watches}
    assert len(said) == len(service.watches)  # once each, however often it was asked
    assert len(logs_at_debug.named("watch current again")) == len(service.watches)
    assert not logs_at_debug.named("task failed, restarting")  # a stop is no failure


async def test_after_a_non_object_event_a_stuck_pod_is_still_acted_on(
    config: ServiceConfig, kube: KubeApiServer
) -> None:
    """Issue 18 #5 as serve met it: after `{"type": "MODIFIED", "object": "x"}` on the Pod
    watch, a later stuck pod was never acted on and /readyz stayed 200. (The stand-in sends
    the event: no real API server can be asked for one.)"""
    async with running(config) as service:
        await until(lambda: service.runtime.ready()[0])
        kube.send_raw_event("v1", "pods", {"type": "MODIFIED", "object": "x"})
        errors = "remediator_input_errors_total"
        await until(lambda: service.registry.get_sample_value(errors, {"source": "kube"}))
        kube.store.create(stuck_pod("vllm-llama-70b-0"))
        rows = await until(service.outbox.rows, timeout=20)
        assert [r.decision.target for r in service.outbox.rows()] == ["vllm-llama-70b-0"], rows
        assert service.runtime.ready()[0]


# --- behind: is the picture the API server's present? (sources/currency.py) ----------------
def test_a_watch_is_behind_until_listed_and_relists_after_a_failure(watching) -> None:  # type: ignore[no-untyped-def]
    """An error may have lost events: the watch relists (not resumes), and says it is
    behind until the new list has been delivered."""
    from tests.standins.kube_api import Fault

    api, got, w, _ = watching
    assert w.behind(time.monotonic()) is None
    api.faults.append(Fault("GET", "/pods", 500, times=1000, after=0))
    wait(lambda: api.close_watches() or w.behind(time.monotonic()))
    why = w.behind(time.monotonic())
    assert why is not None and why.startswith("watch failed (500"), why
    api.faults.clear()
    wait(lambda: w.behind(time.monotonic()) is None)
    assert got.pods().count(("vllm-0", "ADDED")) == 2  # relisted


def test_a_silent_stream_is_behind_cut_and_relisted(tmp_path: Path) -> None:
    """No BOOKMARK when one was due (a half-open connection looks the same): the watch is
    behind, the stream is cut and the watch relists, which brings it up to date."""
    with KubeApiServer() as api:
        api.bookmark_interval_s = 3600  # the stream says nothing
        api.store.create(pod("llm", "vllm-0"))
        got, registry = Got(), CollectorRegistry()
        client = api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig")))
        settings = WatchSettings(timeout_s=30, backoff_initial_s=0.02, bookmark_s=0.2, grace_s=0.1)
        w = KubeWatch(client, WatchTarget("Pod", "llm"), got, SourceMetrics.on(registry), settings)
        w.start()
        try:
            assert w.synced.wait(10)
            why = wait_for_value(lambda: w.behind(time.monotonic()))
            assert why.startswith("no event or BOOKMARK for"), why
            wait(lambda: got.pods().count(("vllm-0", "ADDED")) == 2)  # cut, and relisted
            lists = [r for r in api.sent("GET", "/pods") if not r.query.get("watch")]
            assert len(lists) >= 2
        finally:
            w.stop()
            w.join(5)


async def test_pod_deletions_held_past_the_bound_fail_readyz_until_caught_up(
    config: ServiceConfig, kube: KubeApiServer, logs_at_debug: LogRecorder, tmp_path: Path
) -> None:
    """The Pod watch is cut and cannot relist (the API server answers 500) while a pod's
    budget lapses: its deletion is held (not decided on the old picture), /readyz fails after
    the bound and says why, the gauge says so; once the list comes through, caught up."""
    from tests.runtime.conftest import POLICY
    from tests.standins.kube_api import Fault

    policy = tmp_path / "slower.yaml"
    policy.write_text(POLICY.replace("engine_init: 1,", "engine_init: 3,"))
    runtime = replace(config.runtime, behind_unready_s=0.3)
    async with running(replace(config, runtime=runtime, policy=str(policy))) as service:
        await until(lambda: service.runtime.ready()[0])
        kube.store.create(stuck_pod("vllm-llama-70b-0"))
        await until(lambda: list(service.session.tracker))
        kube.faults.append(Fault("GET", "/pods", 500, times=10**6))
        await until(lambda: kube.close_watches() or service.runtime.driver.held)
        held = "behind: pod deletions held until the watch has caught up"
        await until(lambda: logs_at_debug.named(held))
        suppressed = await until(
            lambda: [x for x in logs_at_debug.named("suppressed") if x["pod"] == "vllm-llama-70b-0"]
        )
        assert [x["guardrail"] for x in suppressed] == ["watch_current"]  # type: ignore[union-attr]
        ready, why = service.runtime.ready()
        assert not ready and "pod deletions held" in why, why
        assert "watch Pod/llm watch failed (500" in why, why
        assert service.registry.get_sample_value("remediator_behind") == 1.0
        labels = {"kind": "Pod", "namespace": "llm"}
        assert service.registry.get_sample_value("remediator_watch_behind", labels) == 1.0
        assert service.outbox.rows() == []
        kube.faults.clear()
        await until(lambda: service.runtime.ready()[0])
        assert service.runtime.driver.held is None
    assert logs_at_debug.named("caught up: held pod deletions are decided again")
