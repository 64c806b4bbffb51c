"""Slow is not stuck: how far behind its siblings a pod's engine init has run so far, or the
last cold starts on its node ran (or are running), by which its stall limit is widened
(`stall.stall_of`).
Pure: the pod's timeline, the history, what was learned of its node.

A pod that has run slow so far (a slow node: a throttled GPU, a slow local disk) runs as slow
in the stretch it is in: its limit widens by its pace, up to MAX_PACE times, once that pace
reaches PACE_FROM; under it a healthy pod's ordinary spread, and so a hung pod's before its
hang, widens nothing, and a hang is found as soon as before. Found by random fleets with slow
GPU nodes (bench_random_fleets; engine init 1.5-3× as long there): judged by its siblings'
times alone, 19 healthy pods were deleted in 7 of fleets 1-330, all on nodes 3× slow, each
after stretches it had ended at 2-3× its siblings' pace. With its own pace from 1.5, none;
from 2, 2; by the least ratio of any one step (not the sum), 2. The example fleets' P99 with
hangs moved by nothing. PACE_FROM is 1.3 since fleets 1-1000: from 1.5, one healthy pod was
deleted (fleet 346, untuned, first wave): on a 3× node, its weights had drawn fast (150 s
against the siblings' median 84 s: 1.58 with the floor counted in), and as the siblings'
median rose the ratio fell under 1.5 and its compile (255 s against their P95 of 88 s) was
judged unwidened. One step's spread is wide (σ 0.3 in the simulator: a 3× pod's single step
may show 1.7×). From 1.3 (or 1.4) none of the 1,000 fleets lost a pod and their P99s moved
by nothing. The price is a hung pod that ran a little slow before it hung: it is found later
by as much. The quick bench_sim's rows moved by under 2%; docs/simulation-defaults.md's
untuned fleet with no spare GPUs and 20% hangs went from 1,275 to 1,370 s (a replica whose
second pod, 1.48× slow before it hung in graph capture, was deleted 99 s later). From 1.0
(any slowness widens), more: untuned with 20% hangs +7% with spare GPUs too, and one unseen
fleet above the seed rule.

Until a pod has ended a step, what it has logged tells its pace little (the stretch to its
first step line, or before that the one to its banner: imports and config, nothing of the
GPUs yet, but a slow disk slows it, as the simulator's slow nodes slow every stretch; random
fleets 1645 and 3410 lost a pod whose banner came at ~150 s against its siblings' ~35 s,
judged in NCCL init at their pace): there the pace of the node's last cold starts
(`NodePaces`) counts too, where it is the larger. After, it still does: one step's spread is
wide, and a pod on a node 2× slow whose weights had drawn at its siblings' pace (own pace
1.26) was deleted mid-compile at 3.3 times their P95 (random fleets 628 and 2448, each once
another knob moved). Its node's pace then came from no cold start, since none had ended
there: each step a pod ends teaches its node's pace too (`PolicyEngine._learn_pace`), so
the node's first pods, still starting, tell it. The price is a hung pod on a slow node found
later by the node's pace. On bench_random_fleets' fleets 1-10,000 (2026-12-06) the default
is above the seed rule in 216 against 212 before, no healthy pod deleted in either, and the
four perturbations that had each lost one healthy pod (`progress.min_samples` 1 or 2,
`progress.factor` 2.25, `engine_logs.max_pods` 32) lose none; bench_sim's headline figures
do not move.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from remediator.policy.config import ProgressConfig
from remediator.policy.history import PhaseHistory, step_key
from remediator.timeline.engine_steps import BEFORE_FIRST_STEP, TO_BANNER
from remediator.timeline.model import PodTimeline

MAX_PACE: Final = 4.0
PACE_QUANTILE: Final = 0.5  # the siblings' median: what a pod of their pace takes
PACE_FROM: Final = 1.3
OWN, NODE = "its own pace so far", "the pace of its node's last cold starts"
NODE_PREFIX, NODE_PHASE = "node:", "engine_pace"  # (no model's phase is called that)


class NodePaces:
    """Each node's pace: the lower median ratio (`ratio_of`) of its last WINDOW samples: a healthy
    cold start's whole run, learned when it is Ready, and a pod's run so far, learned each time
    it ends a step (a slow node is known from its first pods). One is enough (a whole run's
    ratio, the floor counted in, is rarely PACE_FROM on a node that is not slow; with two
    needed, a slow node's first Mixtral pod was deleted in NCCL init in bench_sim's unseen
    fleets); one at the siblings' pace after it brings it back (the lower of two). Kept in the
    model history, as samples of NODE_PHASE under the node's key: where that history goes, they
    go (stored by serve across restarts, relayed between a Kafka worker's partitions and from
    the others' like any cold start's phases)."""

    WINDOW = 3

    def __init__(self, history: PhaseHistory) -> None:
        self._history = history

    def learn(self, node: str, ratio: float) -> None:
        self._history.add(NODE_PREFIX + node, NODE_PHASE, ratio)

    def of(self, node: str | None) -> float:
        if node is None:
            return 1.0
        ratios = sorted(self._history.recent(NODE_PREFIX + node, NODE_PHASE, self.WINDOW))
        return ratios[(len(ratios) - 1) // 2] if ratios else 1.0

    def known(self) -> Iterable[tuple[str, float]]:
        """Each node a healthy cold start has been learned of, and its pace."""
        for key in self._history.models(NODE_PHASE):
            node = key.removeprefix(NODE_PREFIX)
            yield node, self.of(node)


def ratio_of(
    t: PodTimeline, cfg: ProgressConfig, history: PhaseHistory, model: str, started: float | None
) -> float | None:
    """The stretches the pod has ended in this run, summed, over what those took its siblings
    at the median, summed (the stretch before its first step line alone, where that is all
    it has ended), with the floor's worth of the siblings' pace counted in on both sides: a
    stretch short beside the floor, where a few seconds make a large ratio (NCCL init: 25 s
    against 5 s), counts little. None where no sibling timed any of them. A sum, not step by
    step: one step's spread is wide (a pod 3× slow everywhere had steps under its siblings'
    P95), a whole run's is not."""
    ended = _ended(t, started)
    return _ratio(ended[0], cfg, history, model) if ended is not None else None


def pace_of(
    t: PodTimeline,
    cfg: ProgressConfig,
    history: PhaseHistory,
    model: str,
    started: float | None,
    nodes: NodePaces | None = None,
    min_samples: int | None = None,
) -> tuple[float, str]:
    """How much the pod's stall limit widens, and by whose pace: the larger of its own ratio
    so far and its node's (a pod's steps vary: one on a node 2× slow may have drawn its
    weights at its siblings' pace, then its compile at 3.6 times theirs). 1 under PACE_FROM,
    at most MAX_PACE. `min_samples`: the siblings' times a stretch needs to count (the
    progress policy's by default)."""
    ended = _ended(t, started)
    own = (_ratio(ended[0], cfg, history, model, min_samples) if ended is not None else None) or 1.0
    node = nodes.of(t.node) if nodes is not None else 1.0
    pace, by = (own, OWN) if own >= node else (node, NODE)
    return (min(MAX_PACE, pace), by) if pace >= PACE_FROM else (1.0, "")


def first_wave_pace(
    t: PodTimeline,
    cfg: ProgressConfig,
    history: PhaseHistory,
    model: str,
    nodes: NodePaces,
    min_siblings: int,
) -> tuple[float, str]:
    """How much a pod's engine-init budget widens once it has logged its first step line and
    before it has ended a step: `pace_of` judged against as few siblings as set its whole
    cold start (`adaptive.min_siblings`).

    A model's first pods are judged by the phase budget, which stands for want of history at
    the siblings' whole cold start; a pod on a slow node takes longer than that for its engine
    init alone. Random fleets 3249 and 5142 (untuned, one node 3× slow): a Mixtral pod 81 s
    to its first step line (its four siblings 33 s at the median) was deleted 569 s into
    loading its weights, over a 533 s budget; a small model's pods there, 97-158 s against
    22 s, were deleted one after another in a kill loop. Once it ends a step, its own pace
    (`stall.own_pace`) judges it instead. Not before its first step line: its banner's time
    against one sibling's is mostly noise (two draws of a step's spread): widened by it, the
    P99 of 30 of random fleets 1-3,000 moved, 24 later (by up to 965 s; 1782: a pod hung in
    NCCL init, its banner 1.64× its one sibling's, found 549 s later), 6 sooner; with three
    siblings needed, 14 moved. From the first step line, none of them moves."""
    started = t.started_at()
    ended = _ended(t, started)
    if ended is None or not ended[1] or BEFORE_FIRST_STEP not in ended[0]:
        return 1.0, ""
    return pace_of(t, cfg, history, model, started, nodes, max(1, min_siblings))


def _ended(t: PodTimeline, started: float | None) -> tuple[dict[str, float], bool] | None:
    """The stretches the pod ended in this run, by the step whose times judge them, and
    whether that is only the one to its first step line; None when it ended none."""
    if t.engine is None:
        return None
    own = t.engine.judged(started)  # (its first step timed from the container's start)
    if not own:
        if started is None:
            return None
        first = t.engine.first_step(started)
        if first is not None:
            return {BEFORE_FIRST_STEP: max(0.0, first - started)}, True
        banner = t.engine.banner(started)  # (NCCL init next: its banner is all it has told)
        return ({TO_BANNER: max(0.0, banner - started)}, True) if banner is not None else None
    return own, False


def _ratio(
    own: dict[str, float],
    cfg: ProgressConfig,
    history: PhaseHistory,
    model: str,
    min_samples: int | None = None,
) -> float | None:
    need = cfg.min_samples if min_samples is None else min_samples
    took = usual = 0.0
    for step, seconds in own.items():
        median = history.quantile(model, step_key(step), PACE_QUANTILE, need)
        if median is not None:
            took, usual = took + seconds, usual + median
    if usual <= 0.0:
        return None
    return (took + cfg.floor_s) / (usual + cfg.floor_s)
