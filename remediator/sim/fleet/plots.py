"""PNG plots (matplotlib, the `sim` extra): CDF of time to Ready per policy, and a per-pod
phase swimlane of one incident."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from remediator.sim.fleet.results import Lane, RunResult

_COLORS = {"scheduling": "#bbbbbb", "image_pull": "#8fb3e0", "container_start": "#f2c46d",
           "engine_init": "#e07b6b", "ready": "#6bbf73"}  # fmt: skip


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ready_cdf(runs: dict[str, list[RunResult]], path: Path, title: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for policy, results in runs.items():
        values = sorted(v for r in results for v in r.ready_s)
        if not values:
            continue
        n = len(values)
        ax.step(values, [(i + 1) / n for i in range(n)], where="post", label=policy)
    ax.set_xscale("log")
    ax.set_xlabel("time to Ready per requested replica (s, log)")
    ax.set_ylabel("share of replicas")
    ax.set_ylim(0.0, 1.0)
    for q in (0.5, 0.95, 0.99):
        ax.axhline(q, color="#999999", lw=0.5, ls=":")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def incident_lanes(runs: list[RunResult]) -> list[Lane]:
    """The pods of the first replica that remediation acted on (several, when it took more)."""
    for r in runs:
        if not r.lanes:
            continue
        by_slot: dict[int, list[Lane]] = {}
        for lane in r.lanes:
            by_slot.setdefault(lane.slot, []).append(lane)
        best = max(by_slot.values(), key=len)
        return sorted(best, key=lambda lane: lane.created)
    return []


def swimlane(lanes: list[Lane], path: Path, title: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.6 * len(lanes)))
    t0 = min(lane.created for lane in lanes)
    for row, lane in enumerate(lanes):
        end = lane.ended if lane.ended is not None else lane.ready
        marks = [("scheduling", lane.created, lane.scheduled),
                 ("image_pull", lane.pull_start, lane.pulled),
                 ("container_start", lane.pulled or lane.scheduled, lane.started),
                 ("engine_init", lane.started, lane.ready or end)]  # fmt: skip
        for phase, a, b in marks:
            if a is not None and b is None and phase == "engine_init":
                b = end
            if a is not None and b is not None and b > a:
                ax.barh(row, b - a, left=a - t0, color=_COLORS[phase], edgecolor="none")
        if lane.ready is not None:
            ax.plot([lane.ready - t0], [row], marker="o", color=_COLORS["ready"])
        if lane.removed_by:
            ax.plot([(lane.ended or 0) - t0], [row], marker="x", color="black")
        ax.text(0, row + 0.32, f"{lane.pod} ({lane.fate}; {lane.removed_by or 'kept'})",
                fontsize=7)  # fmt: skip
    ax.set_yticks([])
    ax.set_xlabel("seconds since the replica was requested")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COLORS.values()]
    ax.legend(handles, list(_COLORS), fontsize=7, loc="lower right")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
