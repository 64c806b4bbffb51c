"""The core's public boundary: the decider and the guard wired by hand, every record
between them through the one codec, decide exactly what one `Session` decides."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from remediator.contract.codec import decode, decode_wire, encode
from remediator.contract.decision import Decision, Suppressed
from remediator.contract.records import (
    Aging,
    Candidate,
    GotThrough,
    Learned,
    RetryAt,
    Watermark,
)
from remediator.core import Decider, Guard
from remediator.executors.protocol import Poll, Submit
from remediator.policy.outcome import Ignored
from remediator.policy_file import PolicyFile
from remediator.timeline.tracker import StateChange
from tests.core.differential import Advance, Feed, Step, file_stream
from tests.core.test_dry_run_differential import POLICIES, ROOT, _fleet_stream

DECISION = Decision(
    "delete-pod", "llm", "vllm-0", "engine_init for 400s", "inc-1", 1.5e9, uid="u-1",
    workload="llm/Deployment/vllm", params=(("grace", "0"),), pod_created_at=1.4e9,
)  # fmt: skip


class Log(list[tuple[str, str, str, float, str]]):
    """Decisions and suppressions, as the replay output would show them."""

    def transition(self, change: StateChange) -> None:
        pass

    def ignored(self, ignored: Ignored) -> None:
        self.append(("ignored", ignored.rule, ignored.subject, ignored.at, ignored.reason))

    def decision(self, d: Decision) -> None:
        self.append(("decision", d.action, d.target, d.at, d.reason))

    def suppressed(self, s: Suppressed) -> None:
        d = s.decision
        self.append((s.guardrail, d.action, d.target, d.at, f"{s.reason} {s.retry_at}"))


def _session(steps: list[Step], config: PolicyFile) -> Log:
    from remediator.session import Session  # noqa: PLC0415 - the wired one, for comparison

    session, log = Session(config), Log()
    for step in steps:
        if isinstance(step, Feed):
            session.feed(step.item, log)
        else:
            session.advance(step.now, log)
    return log


def _apart(steps: list[Step], config: PolicyFile) -> Log:
    """The decider and the guard as two processes would run them: bytes between them."""
    decider = Decider(config, CollectorRegistry())
    guard = Guard(config.guardrails, CollectorRegistry())
    log = Log()

    def settle(candidate: Candidate) -> None:
        wire = decode_wire(encode(candidate))
        assert isinstance(wire, Candidate)
        result, feedback = guard.judge(wire)
        result = decode(encode(result), Suppressed if isinstance(result, Suppressed) else Decision)
        if isinstance(result, Suppressed):
            log.suppressed(result)
        else:
            log.decision(result)
        if feedback is not None:
            back = decode_wire(encode(feedback))
            assert isinstance(back, GotThrough | RetryAt)
            decider.feedback(back)

    for step in steps:
        if isinstance(step, Feed):
            decider.feed(step.item, log, settle)
        else:
            decider.advance(step.now, log, settle)
    return log


@pytest.mark.parametrize("policy", ["default", "tight"])
def test_the_pieces_apart_decide_as_the_session(policy: str) -> None:
    steps = file_stream(ROOT / "examples" / "incident-70b.jsonl")
    steps += file_stream(
        ROOT / "tests/data/cluster/crashloop_and_delete_k8s-v1.36.3_kwok-v0.8.0.jsonl"
    )
    wired = _session(steps, POLICIES[policy])
    assert any(x[0] == "decision" for x in wired)
    assert _apart(steps, POLICIES[policy]) == wired


def test_the_pieces_apart_hold_a_kill_loop_as_the_session() -> None:
    steps = list(_fleet_stream("untuned/seed-rule")[0])
    wired = _session(steps, POLICIES["seed-rule"])
    assert any("too tight" in x[4] for x in wired)
    assert _apart(steps, POLICIES["seed-rule"]) == wired


def test_every_record_crossing_a_process_round_trips() -> None:
    records: list[object] = [
        Candidate(DECISION, 1.5e9 + 1, 3, "meta-llama/Llama-3.1-70B-Instruct"),
        GotThrough(DECISION, 1.5e9 + 2, dry=True, partition=1),
        RetryAt(DECISION, 1.5e9 + 2, 1.5e9 + 60),
        RetryAt(DECISION, 1.5e9 + 2, 1.5e9 + 30, 5, sooner=True),
        Learned(1.5e9, 2, (("m", "engine_init", 236.0),)),
        Watermark(4, 1.5e9),
    ]
    for record in records:
        assert decode_wire(encode(record)) == record
    for kind, value in (
        (Decision, DECISION),
        (Suppressed, Suppressed(DECISION, "dedup", "duplicate", None, False)),
        (Submit, Submit(DECISION)),
        (Poll, Poll(DECISION, "delete-stuck-pod-inc-1")),
        (Aging, Aging(RetryAt(DECISION, 1.5e9, 1.5e9 + 500, 2), "m", "min_age")),
    ):
        assert decode(encode(value), kind) == value  # type: ignore[arg-type]


def test_a_bad_record_is_refused_whole_and_says_where() -> None:
    good = encode(Candidate(DECISION, 1.0))
    with pytest.raises(msgspec.ValidationError, match=r"decision\.action"):
        decode_wire(good.replace(b'"delete-pod"', b'"explode-pod"'))
    with pytest.raises(msgspec.ValidationError, match="type"):
        decode_wire(b'{"type": "nonsense", "at": 1}')


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_the_codecs_error(data: bytes) -> None:
    try:
        record = decode_wire(data)
    except msgspec.DecodeError:  # ValidationError is one: a clear error, nothing else
        return
    assert isinstance(record, Candidate | GotThrough | RetryAt | Learned | Watermark)


def test_stream_steps_are_what_they_say() -> None:
    steps = file_stream(ROOT / "tests" / "data" / "cold_start_70b.jsonl")
    assert isinstance(steps[-1], Advance) and all(isinstance(s, Feed) for s in steps[:-1])
    assert Path(ROOT / "examples" / "incident-70b.jsonl").exists()
