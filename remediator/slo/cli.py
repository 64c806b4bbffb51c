"""`remediator slo-report --prometheus URL [--window 7d] [--target first_token<60s@99%]`."""

from __future__ import annotations

import sys

import click
import orjson
import requests

from remediator.inputs.timefmt import parse_time
from remediator.slo.prom import Prom
from remediator.slo.report import build, write_png, write_table
from remediator.slo.target import parse_target


@click.command("slo-report")
@click.option(
    "--prometheus",
    required=True,
    metavar="URL",
    help="Prometheus base URL, e.g. http://prometheus.monitoring:9090.",
)
@click.option("--window", default="7d", show_default=True, help="PromQL range: 1h, 24h, 7d, 30d.")
@click.option(
    "--target",
    "targets",
    multiple=True,
    default=("first_token<60s@99%",),
    show_default=True,
    metavar="PHASE<DURATION@PERCENT",
    help="An objective to check (repeatable): a phase (scheduling, image_pull, "
    "container_start, engine_init, first_token, total) or an engine-init step.",
)
@click.option(
    "--at",
    metavar="RFC3339",
    help="End of the window (default: the last scrape of serve), e.g. last Monday's report.",
)
@click.option("--top", default=10, show_default=True, help="How many worst pods to list.")
@click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--png", metavar="FILE", help="Also plot P50/P95/P99 per model to a PNG (needs matplotlib)."
)
def slo_report(
    prometheus: str,
    window: str,
    targets: tuple[str, ...],
    at: str | None,
    top: int,
    output: str,
    png: str | None,
) -> None:
    """Cold-start SLOs over a window, from the metrics `remediator serve` exports:
    P50/P95/P99 per model and phase (and engine-init step), the share of pods within each
    target, and the worst pods.

    \b
    Shares come from the histogram buckets: exact when the threshold is a bucket bound
    (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1800 s),
    else interpolated and marked so. Worst pods are the longest a pod was seen in one
    unfinished phase (remediator_pod_phase_elapsed_seconds, sampled at each scrape).

    \b
    Counts come from increase() over the window, evaluated at serve's last scrape (or --at):
    whole for series that start inside it at zero (serve exports a model's series at zero
    from its first pod on; a pod whose phase ended before that scrape is not counted).

    \b
    Exit codes: 0 every target met; 1 a target missed; 2 bad usage or Prometheus unreachable.
    """
    try:
        parsed = [parse_target(t) for t in targets]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None
    try:
        at_ts = parse_time(at) if at else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--at") from None
    try:
        report = build(Prom(prometheus, at_ts), window, parsed, top)
    except requests.RequestException as exc:
        raise click.UsageError(f"Prometheus at {prometheus}: {exc}") from None
    except Exception as exc:  # the client raises its own for a 4xx/5xx (a bad --window)
        if type(exc).__name__ != "PrometheusApiClientException":
            raise
        raise click.UsageError(f"Prometheus at {prometheus} refused the query: {exc}") from None
    if output == "json":
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        write_table(report, sys.stdout)
    if png:
        try:
            write_png(report, png)
        except RuntimeError as exc:
            raise click.UsageError(str(exc)) from None
    missed = [t for t in report["targets"] if t["share"] is not None and not t["met"]]
    sys.exit(1 if missed else 0)
