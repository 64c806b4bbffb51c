"""The `kubectl coldstart` command line (also `remediator coldstart`)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import IO, Any, NoReturn

import click
import orjson

from remediator.coldstart.kube import Forbidden, Kube, KubeError, load
from remediator.coldstart.render import Style, json_docs, text, use_color
from remediator.coldstart.snapshot import LOG_BYTES, Snapshot, selectors, take
from remediator.coldstart.target import TargetError, parse_target
from remediator.contract.errors import ConfigError
from remediator.timeline.tracker import Tracker

EXIT_ERROR = 1  # the API could not be asked (unreachable, kubeconfig, not found)
EXIT_USAGE = 2
EXIT_FORBIDDEN = 3  # RBAC refused the pods or the Events


@click.command(
    "coldstart",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("target", required=False, metavar="[POD | deploy/NAME | sts/NAME]")
@click.option("-n", "--namespace", help="Namespace (default: the context's, else default).")
@click.option("-l", "--selector", help="Label selector for the pods, e.g. app=vllm.")
@click.option(
    "--logs",
    is_flag=True,
    help="Also read each engine container's log (RBAC: get pods/log) to split engine_init "
    "into vLLM's steps.",
)
@click.option(
    "-w", "--watch", is_flag=True, help="Follow live until Ctrl-C, redrawn at most once a second."
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: bars and figures for people. json: serve's /timelines objects, one per line.",
)
@click.option("--context", help="The kubeconfig context to use (default: its current context).")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Path to the kubeconfig (default: $KUBECONFIG, else ~/.kube/config).",
)
@click.option(
    "--policy",
    type=click.Path(exists=True, dir_okay=False),
    help="serve's policy file, for its stuck_pod.engine_containers (which container is the "
    "engine); the built-in default otherwise.",
)
@click.option(
    "--log-bytes",
    type=click.IntRange(min=1024),
    default=LOG_BYTES,
    show_default=True,
    help="With --logs: read at most this much of each log, from its start.",
)
def coldstart(
    target: str | None,
    namespace: str | None,
    selector: str | None,
    logs: bool,
    watch: bool,
    output: str,
    context: str | None,
    kubeconfig: str | None,
    policy: str | None,
    log_bytes: int,
) -> None:
    """Where did each pod's cold start go? Phase by phase, from the live API, now.

    \b
    Lists the pods and their Events (core/v1 and events.k8s.io/v1) once, with your
    kubeconfig and context, and runs them through remediator's timeline core (the one
    `remediator replay` and serve's /timelines use). For each pod it prints a bar per
    phase: scheduling, init, image_pull, container_start, engine_init (split into vLLM's
    steps with --logs), first_token when known; for each workload, the P50/P95 of each
    phase; for each pod not Ready yet, where it is stuck, for how long, and how its
    siblings did ("engine_init for 312s; siblings P50 240s, P95 300s (7 pods)").

    \b
    Examples:
      kubectl coldstart -n llm deploy/vllm-llama-70b        # a Deployment's pods
      kubectl coldstart -n llm sts/vllm-70b --logs          # vLLM's engine-init steps too
      kubectl coldstart -n llm vllm-llama-70b-7d9c-x2x4q    # one pod
      kubectl coldstart -n llm -l app=vllm -w               # follow until Ctrl-C
      kubectl coldstart -n llm -o json | jq -c 'select(.kind=="waiting")'
    No target and no -l: every pod of the namespace.

    \b
    Needs only read access: list pods and events (either Event API; and watch them for
    --watch), get deployments or statefulsets when one is named, get pods/log with --logs
    (without it, that is said once and everything else is shown). No remediator
    service, no Prometheus.
    NO_COLOR set (not empty), or output not a terminal: no colours.

    \b
    Exit codes: 0 shown (whatever state the pods are in; Ctrl-C ends --watch with 0);
    1 the API could not be asked (unreachable, kubeconfig, pod or workload not found);
    2 bad usage; 3 forbidden: RBAC refused what is needed (the message names the verb
    and resource).
    """
    logging.getLogger("remediator").setLevel(logging.CRITICAL)  # watch retries: shown, not logged
    try:
        goal = parse_target(target, selector)
    except TargetError as exc:
        raise click.UsageError(str(exc)) from None
    tracker = Tracker(_engines(policy))
    try:
        api, default_ns = load(kubeconfig, context)
        ns = namespace or default_ns
        kube = Kube(api)
        pod_sel = selectors(kube, ns, goal)
        snap = take(kube, ns, goal, tracker, pod_sel, logs=logs, log_bytes=log_bytes)
    except TargetError as exc:
        _fail(str(exc), EXIT_ERROR)
    except Forbidden as exc:
        _fail(str(exc), EXIT_FORBIDDEN)
    except KubeError as exc:
        _fail(str(exc), EXIT_ERROR)
    if goal.kind == "pod" and not snap.uids:
        _fail(f'pod "{goal.name}" not found in namespace {ns}', EXIT_ERROR)
    for note in snap.notes:
        click.echo(f"warning: {note}", err=True)
    if snap.refused:
        click.echo(f"warning: {snap.refused} objects refused as malformed", err=True)
    scope = f"{ns} {goal.label}"
    out = sys.stdout
    color = use_color(out, os.environ)
    try:
        if not watch:
            _show(out, snap, snap.now(), output, scope, Style(color), [])
            out.flush()
            return
        if snap.events_api == "events.k8s.io":
            # (serve's watch follows core/v1 Events; the pods' own status still moves on)
            click.echo("warning: --watch follows the pods, not their Events", err=True)
        _follow(api, snap, pod_sel, logs, log_bytes, output, scope, Style(color), out)
    except BrokenPipeError:
        # `kubectl coldstart ... | head`: the reader has what it wanted; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


def _engines(policy: str | None) -> tuple[str, ...]:
    """The engine containers serve's policy names (else the tracker finds the GPU one)."""
    if policy is None:
        return ()
    from remediator.policy_file import load_policy_file  # only with --policy: its imports cost

    try:
        return load_policy_file(policy).rules.stuck_pod.engine_containers
    except ConfigError as exc:
        raise click.UsageError(f"policy file {policy}: {exc}") from None


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _show(
    out: IO[str],
    snap: Snapshot,
    now: float,
    output: str,
    scope: str,
    style: Style,
    notes: list[str],
) -> None:
    timelines = snap.timelines()
    if output == "json":
        for doc in json_docs(timelines, now):
            out.write(orjson.dumps(doc).decode() + "\n")
        return
    if not timelines:
        out.write(f"No pods found: {scope}.\n")
        return
    for line in text(timelines, now, scope, style):
        out.write(line + "\n")
    for note in notes:
        out.write(style(f"({note})", "dim") + "\n")


def _follow(
    api: Any,
    snap: Snapshot,
    pod_sel: dict[str, str | None],
    logs: bool,
    log_bytes: int,
    output: str,
    scope: str,
    style: Style,
    out: IO[str],
) -> None:
    tty = out.isatty()
    shown: dict[str, bytes] = {}
    _stop_on_signals()

    def draw(s: Snapshot, now: float, notes: list[str]) -> None:
        if output == "json":
            _changed_json(out, s, now, shown)
        elif tty:
            out.write("\x1b[H\x1b[2J")  # home, clear: redrawn in place
            _show(out, s, now, output, scope, style, [*notes, "Ctrl-C to stop"])
        else:
            _changed_text(out, s, now, scope, style, shown)
        out.flush()

    draw(snap, snap.now(), [])  # the first screen, before the watches' imports and lists
    from remediator.coldstart import live  # only --watch needs serve's watch and log threads

    follow: live.Follow | None = None
    try:
        follow = live.start(api, snap, pod_sel, logs=logs, log_bytes=log_bytes)
        live.run(follow, draw, threading.Event())
    except KeyboardInterrupt:
        pass  # Ctrl-C: the way out of --watch, not an error
    finally:
        if follow is not None:
            follow.stop()


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM end --watch with exit 0. Python leaves SIGINT ignored when the
    process started with it ignored (a background job of a shell without job control, as a
    CI runner starts it): --watch would then never end on Ctrl-C."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def _changed_json(out: IO[str], snap: Snapshot, now: float, shown: dict[str, bytes]) -> None:
    """Each object again only when it changed (a pod's timeline, a workload's figures); a
    pod that went away, once more with its state `deleted`."""
    seen: set[str] = set()
    for doc in json_docs(snap.timelines(), now):
        key = f"{doc['kind']}/{doc.get('uid') or doc.get('workload')}"
        seen.add(key)
        # (a waiting pod's seconds count on: compared without them)
        raw = orjson.dumps({**doc, "for_s": None} if doc["kind"] == "waiting" else doc)
        if shown.get(key) != raw:
            shown[key] = raw
            out.write(orjson.dumps(doc).decode() + "\n")
    for key in [k for k in shown if k not in seen]:
        del shown[key]
        kind, _, uid = key.partition("/")
        gone = snap.tracker.get(uid) if kind == "timeline" else None
        if gone is not None:
            out.write(orjson.dumps(gone.to_json()).decode() + "\n")


def _changed_text(
    out: IO[str], snap: Snapshot, now: float, scope: str, style: Style, shown: dict[str, bytes]
) -> None:
    """Not a terminal: a new screen only when a timeline changed, not every second."""
    state = orjson.dumps([t.to_json() for t in snap.timelines()])
    if shown.get("") == state:
        return
    shown[""] = state
    _show(out, snap, now, "text", scope, style, [])
    out.write("\n")


def main() -> None:
    """The `kubectl-coldstart` console script: kubectl runs it as `kubectl coldstart`."""
    coldstart(prog_name="kubectl coldstart")
