"""How the defaults search settles a tie (`sim.fleet.defaults._pick`): within seed noise of
the best, the value nearest the defaults before, unless that loses more than noise on a
scenario the goals name (5% hangs) that the score's mean over sixteen scenarios hides."""

from __future__ import annotations

from remediator.policy_file import PolicyFile
from remediator.sim.fleet.defaults import Evaluation, _pick
from remediator.sim.fleet.results import Summary


def _summary(name: str, p99: float) -> Summary:
    ready = {"p50": p99 / 2, "p95": p99, "p99": p99, "max": p99, "spread": p99 / 2}
    return Summary("candidate", name, 100, ready, dict(ready), 0, 100, 0, 0, 0.0, 0, 1.0, 0,
                   0.0, 0, {})  # fmt: skip


def _evaluation(score: float, untuned_5: float) -> Evaluation:
    p99 = {"tuned 0%": 52.0, "tuned 5%": 116.0, "untuned 0%": 640.0, "untuned 5%": untuned_5}
    summaries = {name: _summary(name, v) for name, v in p99.items()}
    return Evaluation(PolicyFile(), summaries, score, True, 0.0, [])


def test_a_tie_goes_to_the_value_before() -> None:
    before, new = _evaluation(1.68, 950.0), _evaluation(1.66, 943.0)
    assert _pick([(2.0, new), (3.0, before)], home=3.0) is before


def test_a_tie_that_loses_a_goal_scenario_beyond_noise_goes_to_the_best() -> None:
    before, new = _evaluation(1.68, 1138.0), _evaluation(1.66, 943.0)
    assert _pick([(2.0, new), (3.0, before)], home=3.0) is new


def test_beyond_noise_on_the_score_the_best_wins_whatever_the_goals() -> None:
    before, new = _evaluation(1.80, 900.0), _evaluation(1.66, 943.0)
    assert _pick([(2.0, new), (3.0, before)], home=3.0) is new
