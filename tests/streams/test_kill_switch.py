"""The kill switch on Kafka: serve's file, read by the worker that holds the guard.

`SwitchPoll` reads the file (fail closed, as serve's driver: tests/runtime) at most every
`every_s`; `GuardCore.set_kill_switch` puts it in the guard state, so the `kill_switch`
stage holds every decision while it says on. The clock is injected."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from remediator.contract.decision import Decision, Suppressed
from remediator.policy_file import PolicyFile
from remediator.streams.core import Candidate, GuardCore, Watermark
from remediator.streams.kill_switch import SwitchPoll


class Ticks:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_file_is_read_at_most_every_interval_and_unclear_is_on(tmp_path: Path) -> None:
    path = tmp_path / "kill-switch"
    path.write_text("on\n")
    clock, registry = Ticks(), CollectorRegistry()
    poll = SwitchPoll(str(path), registry, every_s=1.0, monotonic=clock)
    assert poll.now() == (True, f"{path} says on")
    path.write_text("off")
    clock.now = 0.5
    assert poll.now()[0] is True  # not read again yet
    clock.now = 1.0
    assert poll.now()[0] is False
    assert registry.get_sample_value("remediator_kill_switch_engaged") == 0
    path.write_bytes(b"\xff\xfe\x00maybe")  # neither on nor off: on (fail closed)
    clock.now = 2.0
    assert poll.now()[0] is True
    assert registry.get_sample_value("remediator_kill_switch_unclear") == 1
    path.unlink()  # the key removed from the ConfigMap: off
    clock.now = 3.0
    assert poll.now()[0] is False
    assert registry.get_sample_value("remediator_kill_switch_unclear") == 0


def stuck(at: float) -> Decision:
    return Decision(
        "delete-pod", "ns", "pod-a", "why", "inc-a", at, uid="uid-a", workload="ns/Deployment/w",
        pod_created_at=at - 3600.0, expected_cold_start_s=60.0,
    )  # fmt: skip


def judged(guard: GuardCore, at: float) -> Decision | Suppressed | None:
    guard.take(Candidate(stuck(at), at, 0))
    (released,) = guard.take(Watermark(0, at))
    return released.result


def test_the_guard_holds_every_decision_while_the_switch_is_on() -> None:
    guard = GuardCore(PolicyFile(), partitions=1)
    guard.changed()
    guard.set_kill_switch(True, "/etc/remediator/switches/kill-switch says on")
    assert "state" in guard.changed()
    guard.set_kill_switch(True, "/etc/remediator/switches/kill-switch says on")
    assert "state" not in guard.changed(), "the same word twice is no change"
    held = judged(guard, 100.0)
    assert isinstance(held, Suppressed) and held.guardrail == "kill_switch"
    guard.set_kill_switch(False, "/etc/remediator/switches/kill-switch says off")
    assert isinstance(judged(guard, 200.0), Decision)
