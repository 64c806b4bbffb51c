"""A dry run decides exactly what a live run does (issue 18, defect 11): whatever gets
through the guardrails, acted or "would", is the same feedback to the decider, so the
kill-loop guard remembers a dry-run deletion as it remembers a live one."""

from __future__ import annotations

from tests.policy.builders import T0, pod
from tests.policy.conftest import RELAXED, Run, make_run

UID_A = "11111111-2222-3333-4444-555555555555"
UID_B = "99999999-2222-3333-4444-555555555555"
DRY = RELAXED + "  dry_run: {enabled: true}\n  blast_radius: {window_s: 1}\n"
LIVE = RELAXED + "  blast_radius: {window_s: 1}\n"


def _crash_loop(run: Run) -> list[tuple[str, str, float]]:
    """Pod A hangs in engine init; deleted (or not: the stream is the one a live run saw),
    its replacement B is created after the deletion and is as slow."""
    run.feed(pod(created=0, scheduled=1, started=10)).at(T0 + 95)
    run.feed(pod(created=0, scheduled=1, started=10, watch="DELETED"))
    b = "vllm-70b-7c9d5b6f4-fghij"
    run.feed(pod(b, UID_B, watch="ADDED", created=96, scheduled=97, started=100))
    run.at(T0 + 400)
    got = [(d.action, d.target, d.at) for d in run.decisions]
    got += [(s.decision.action, s.decision.target, s.decision.at) for s in run.held if s.simulated]
    return sorted(got, key=lambda x: x[2])


def test_a_dry_run_holds_a_kill_loop_as_the_live_run_does() -> None:
    live, dry = make_run(LIVE), make_run(DRY)
    acted, would = _crash_loop(live), _crash_loop(dry)
    # Live deletes A, then holds B and tells on-call the budget looks too tight.
    assert [(a, t) for a, t, _ in acted] == [
        ("delete-pod", "vllm-70b-7c9d5b6f4-abcde"),
        ("notify", "vllm-70b-7c9d5b6f4-fghij"),
    ]
    assert "too tight" in live.decisions[-1].reason
    assert would == acted
    assert "too tight" in dry.decisions[-1].reason


def test_a_deletion_decided_late_is_remembered_at_its_own_time() -> None:
    """A serve started again sees a stuck pod only after its deadline (found by the live
    differential): it decides at once, stamped with the deadline. The kill-loop memory dates
    the deletion by that stamp, as a serve that ran on did, so a replacement made since (by
    the other serve's deletion) that is as slow is held and told, not deleted in turn."""
    b = "vllm-70b-7c9d5b6f4-fghij"
    late = make_run(LIVE).at(T0 + 150)  # the restarted serve's clock, before it sees anything
    late.feed(pod(created=0, scheduled=1, started=10))  # A, past its deadline
    late.feed(pod(b, UID_B, watch="ADDED", created=120, scheduled=121, started=125)).at(T0 + 400)
    on_time = make_run(LIVE)
    on_time.feed(pod(created=0, scheduled=1, started=10)).at(T0 + 119)
    on_time.feed(pod(b, UID_B, watch="ADDED", created=120, scheduled=121, started=125))
    on_time.at(T0 + 400)
    expected = [("delete-pod", "vllm-70b-7c9d5b6f4-abcde"), ("notify", b)]
    assert on_time.actions() == expected
    assert late.actions() == expected
    assert [d.at for d in late.decisions] == [d.at for d in on_time.decisions]
