"""The SLO report: figures from Prometheus → a dict (the JSON), a table, a PNG."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import IO, Any

from remediator.inputs.timefmt import format_time
from remediator.slo.prom import PHASE, STEP, Prom, Row
from remediator.slo.target import Target, share_within
from remediator.timeline.engine_steps import TIMELINE_STEPS
from remediator.timeline.model import PHASES

_PHASE_ORDER = {p: i for i, p in enumerate((*PHASES, "total"))}
_STEP_ORDER = {s: i for i, s in enumerate(TIMELINE_STEPS)}


def build(prom: Prom, window: str, targets: list[Target], top: int) -> dict[str, Any]:
    prom.pin_to_last_scrape()
    phases = prom.quantile_rows(PHASE, "phase", window)
    steps = prom.quantile_rows(STEP, "step", window)
    phases.sort(key=lambda r: (r.model, _PHASE_ORDER.get(r.phase, 99)))
    steps.sort(key=lambda r: (r.model, _STEP_ORDER.get(r.phase, 99)))
    return {
        "prometheus": prom.url,
        "window": window,
        "at": format_time(prom.at) if prom.at is not None else None,
        "phases": [_row(r, "phase") for r in phases],
        "engine_init_steps": [_row(r, "step") for r in steps],
        "targets": [_target(prom, t, window) for t in targets],
        "worst_pods": prom.worst_pods(window, top),
    }


def _row(r: Row, key: str) -> dict[str, Any]:
    doc = asdict(r)
    doc[key] = doc.pop("phase")
    doc["pods"] = round(r.pods)
    return doc


def _target(prom: Prom, t: Target, window: str) -> dict[str, Any]:
    metric, by = (STEP, "step") if t.is_step else (PHASE, "phase")
    per_model = prom.buckets(metric, by, t.phase, window)
    models = []
    all_pods = all_within = 0.0
    exact = True
    for model, buckets in sorted(per_model.items()):
        share = share_within(buckets, t.seconds)
        if share.pods <= 0:
            continue
        all_pods, all_within = all_pods + share.pods, all_within + share.within
        exact = exact and share.exact
        models.append(_share_doc(model, share.pods, share.within, t))
    doc = _share_doc(None, all_pods, all_within, t)
    doc.pop("model")
    return {
        "target": t.text,
        "phase": t.phase,
        "seconds": t.seconds,
        "objective": t.objective,
        "exact": exact,  # False: the threshold falls inside a bucket, so interpolated
        **doc,
        "models": models,
    }


def _share_doc(model: str | None, pods: float, within: float, t: Target) -> dict[str, Any]:
    share = within / pods if pods > 0 else None
    return {
        "model": model,
        "pods": round(pods),
        "within": round(within, 1),
        "share": round(share, 4) if share is not None else None,
        "met": share is not None and share >= t.objective,
    }


# --- the table -------------------------------------------------------------------------------
def write_table(report: dict[str, Any], out: IO[str]) -> None:
    def say(line: str = "") -> None:
        out.write(line + "\n")

    at = f" to {report['at']}" if report["at"] else ""
    say(f"cold starts over {report['window']}{at} (Prometheus {report['prometheus']})")
    _quantiles(say, "phase", report["phases"])
    if report["engine_init_steps"]:
        say()
        say("engine_init by vLLM step")
        _quantiles(say, "step", report["engine_init_steps"])
    for t in report["targets"]:
        say()
        how = "" if t["exact"] else " (estimated: the threshold is inside a bucket)"
        verdict = "no pods in the window" if t["share"] is None else _verdict(t)
        say(f"target {t['target']}: {verdict}{how}")
        for m in t["models"]:
            say(f"  {m['model'][-40:]:<40} {_verdict(m)}")
    if report["worst_pods"]:
        say()
        say("worst pods (longest seen in one phase, sampled at each scrape)")
        for p in report["worst_pods"]:
            where = f"{p['namespace']}/{p['pod']}"
            say(f"  {where[-50:]:<50} {p['phase']:<16} {p['seconds']:>8.0f}s  {p['model'] or '-'}")


def _verdict(d: dict[str, Any]) -> str:
    mark = "met" if d["met"] else "MISSED"
    return f"{d['share'] * 100:.1f}% of {d['pods']} pods within  {mark}"


def _quantiles(say: Callable[..., None], key: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        say("  (no cold starts in the window)")
        return
    say(f"  {'model':<40} {key:<16} {'pods':>5} {'p50':>8} {'p95':>8} {'p99':>8}")
    for r in rows:
        cells = [_secs(r[q]) for q in ("p50", "p95", "p99")]
        say(f"  {r['model'][-40:]:<40} {r[key]:<16} {r['pods']:>5} " + " ".join(cells))


def _secs(v: float | None) -> str:
    return f"{v:>7.1f}s" if v is not None else f"{'-':>8}"


# --- the plot --------------------------------------------------------------------------------
def write_png(report: dict[str, Any], path: str) -> None:
    """P50/P95/P99 per phase (and engine-init step), one panel per model. Needs matplotlib
    (`pip install 'remediator[plot]'`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("--png needs matplotlib: pip install 'remediator[plot]'") from None
    rows = report["phases"] + [
        {**r, "phase": f"· {r['step']}"} for r in report["engine_init_steps"]
    ]
    models = sorted({r["model"] for r in rows}) or ["(no data)"]
    fig, axes = plt.subplots(len(models), 1, figsize=(10, 3.2 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models, strict=True):
        mine = [r for r in rows if r["model"] == model]
        labels = [r["phase"] for r in mine]
        ys = range(len(mine))
        for i, (q, color) in enumerate(
            (("p50", "#4c78a8"), ("p95", "#f58518"), ("p99", "#e45756"))
        ):
            values = [r[q] or 0.0 for r in mine]
            ax.barh([y + (i - 1) * 0.27 for y in ys], values, height=0.27, color=color, label=q)
        ax.set_yticks(list(ys), labels)
        ax.invert_yaxis()
        ax.set_xlabel("seconds")
        ax.set_title(f"{model} — cold start over {report['window']}")
        for t in report["targets"]:
            if any(lbl.strip("· ") == t["phase"] for lbl in labels):
                style = ("--", ":", "-.")[report["targets"].index(t) % 3]
                ax.axvline(t["seconds"], color="black", linestyle=style, label=t["target"])
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
