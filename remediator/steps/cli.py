"""`remediator step ...`: the commands Argo Workflow steps run.

Each prints one JSON verdict on stdout, logs JSON lines on stderr and exits with a
code from `report.ExitCode`. Only the standard library and click are imported at
start: the Kubernetes client loads inside the Kubernetes steps, so the GPU
verifier runs on a node image that has nothing but python, click and nvidia-smi.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click

from remediator.steps import validate
from remediator.steps.errors import StepError
from remediator.steps.report import EXIT_CODES_HELP, ExitCode, configure, emit, log

# The unfinished phases a stuck pod is found in (timeline.model.UNFINISHED; spelled out here:
# the step CLI imports nothing heavy before it knows which step runs).
PHASES = ("scheduling", "init", "image_pull", "container_start", "engine_init")

F = TypeVar("F", bound=Callable[..., Any])
_NS_HELP = "Namespace (a DNS-1123 label; names are checked before any call)."
_OUTCOME_OF_ERROR = {
    ExitCode.PRECONDITION: "precondition_failed",
    ExitCode.TIMEOUT: "timeout",
    ExitCode.ERROR: "error",
}


def _checked(check: Callable[[str], str | None]) -> Callable[..., Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        problem = None if value is None else check(value)
        if problem:
            raise click.BadParameter(f"{value!r} {problem}", ctx=ctx, param=param)
        return value

    return callback


def _incident(f: F) -> F:
    return click.option(
        "--incident",
        envvar="REMEDIATOR_INCIDENT",
        metavar="ID",
        help="Incident id, put on every log line and in the verdict [env REMEDIATOR_INCIDENT].",
    )(f)


def _kube(f: F) -> F:
    f = click.option("--context", metavar="NAME", help="kubeconfig context to use.")(f)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        help="kubeconfig file. Without it: the pod's service account when "
        "KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config.",
    )(f)


def _namespace(f: F) -> F:
    return click.option(
        "--namespace", "-n", required=True, callback=_checked(validate.dns1123_label), help=_NS_HELP
    )(f)


def _name(flag: str, help: str) -> Callable[[F], F]:
    """A required object name (`--pod`, `--deployment`, `--node`), checked before any call."""
    return click.option(
        flag, required=True, callback=_checked(validate.dns1123_subdomain), help=help
    )


def _uid(help: str) -> Callable[[F], F]:
    return click.option("--uid", required=True, callback=_checked(validate.uid), help=help)


def _poll_interval(default: float) -> Callable[[F], F]:
    return click.option(
        "--poll-interval",
        default=default,
        show_default=True,
        type=click.FloatRange(min=0, min_open=True),
        metavar="S",
    )


class _Done(Protocol):
    """What a Kubernetes step's action gives back (each has more fields of its own)."""

    @property
    def outcome(self) -> str: ...
    @property
    def action_taken(self) -> bool: ...
    @property
    def detail(self) -> str: ...


def _fields(done: _Done, *more: str, **flags: Any) -> dict[str, Any]:
    """Log an action's result and give its verdict fields: outcome, action_taken, `flags`
    (dry_run), detail, then the result's own fields named in `more`, in that order."""
    log(done.detail, step_outcome=done.outcome)
    head = {"outcome": done.outcome, "action_taken": done.action_taken, **flags}
    return {**head, "detail": done.detail, **{name: getattr(done, name) for name in more}}


def _finish(step: str, incident: str | None, fields: dict[str, Any], code: ExitCode) -> None:
    head = {"step": step, "outcome": fields.get("outcome"), "exit_code": int(code)}
    verdict = {**head, "incident": incident, **fields}
    emit(verdict)
    log("done", step_outcome=fields.get("outcome"), exit_code=int(code))
    raise SystemExit(int(code))


def _run(step: str, incident: str | None, target: dict[str, Any], body: Callable[[], Any]) -> None:
    """Run a step body that returns (code, fields); turn a StepError into a verdict."""
    configure(step, incident)
    log("start", **target)
    try:
        code, fields = body()
    except StepError as e:
        log(e.detail, level=40, reason=e.reason)
        fields = {"outcome": _OUTCOME_OF_ERROR[e.code], "reason": e.reason, "detail": e.detail}
        code = e.code
    _finish(step, incident, {**fields, "target": target}, code)


@click.group(
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
def step() -> None:
    """The commands Argo Workflow steps run (one action each, safe to retry).

    \b
    Each prints ONE JSON object on stdout (the verdict: Argo's outputs.result),
    JSON log lines on stderr, and exits with a code that says what happened.
    Kubernetes steps validate names and UIDs before any call and support
    --dry-run (a server-side dry run: the API server checks everything, changes
    nothing).

    \b
      remediator step delete-pod --namespace llm --pod vllm-0 --uid <uid>
      remediator step rollout-restart -n kube-system --daemonset gpu-warmup \\
          --image registry/vllm:0.6.3 --timeout 900
      remediator step verify-gpu-memory --samples 10 --interval 1 --max-spread-mib 256
      remediator step cordon-node --node gpu-node-7
      remediator step hedge-pod -n llm --deployment vllm-70b --pod vllm-70b-x --uid <uid> \\
          --timeout 1800
    """


@step.command("delete-pod", epilog=EXIT_CODES_HELP)
@_namespace
@_name("--pod", "Pod name.")
@_uid("metadata.uid of the pod instance to delete (the one the decision saw).")
@click.option(
    "--grace-period",
    type=click.IntRange(min=0),
    metavar="S",
    help="Seconds the pod gets to stop (default: the pod's own terminationGracePeriodSeconds).",
)
@click.option(
    "--phase",
    type=click.Choice(("", *PHASES)),
    default="",
    help="The phase the decision found the pod stuck in: a pod that has left it is spared "
    "(empty: any unfinished phase).",
)
@click.option("--dry-run", is_flag=True, help="Ask the API server to check, not to delete.")
@_kube
@_incident
def delete_pod_command(
    namespace: str,
    pod: str,
    uid: str,
    grace_period: int | None,
    phase: str,
    dry_run: bool,
    kubeconfig: str | None,
    context: str | None,
    incident: str | None,
) -> None:
    """Delete ONE pod instance: the one with this UID, never a replacement, and
    only while it is still stuck.

    \b
    It looks again first: a quorum read of the pod, judged by the core. A pod
    that became Ready, left --phase, finished or is going is spared. The delete
    then carries the UID and the resourceVersion it looked at as preconditions,
    so the API server itself refuses (409 Conflict) a newer instance (e.g. a
    StatefulSet pod recreated since the decision) or a pod that changed since the
    look (looked at again).

    \b
    Outcomes (all exit 0: in each, the stuck instance is no longer there, is
    now being removed, or needs no removal, and retrying could not do more):
      deleted       the pod with that UID is being deleted
      already_gone  404: no pod of that name any more
      replaced      a pod of that name exists with another UID; left alone
                    (its UID is in "current_uid")
      spared        it is no longer stuck (Ready, moved on, finished); left alone
      would_delete  --dry-run: the delete would go through
    """

    def body() -> tuple[ExitCode, dict[str, Any]]:
        from kubernetes import client

        from remediator.steps.delete_pod import delete_pod
        from remediator.steps.kube import api_client

        core = client.CoreV1Api(api_client(kubeconfig, context))
        done = delete_pod(core, namespace, pod, uid, grace_period, dry_run, phase or None)
        return ExitCode.OK, _fields(done, "current_uid", dry_run=dry_run)

    _run("delete-pod", incident, {"namespace": namespace, "pod": pod, "uid": uid}, body)


@step.command("rollout-restart", epilog=EXIT_CODES_HELP)
@_namespace
@_name("--daemonset", "DaemonSet name, e.g. the GPU warmup gpu-warmup.")
@click.option(
    "--image",
    callback=_checked(validate.image),
    help="Set the pre-pull init container's image (the new inference image) in the same patch.",
)
@click.option(
    "--container",
    default="prepull",
    show_default=True,
    callback=_checked(validate.dns1123_label),
    help="Name of the init container that --image replaces.",
)
@click.option(
    "--timeout",
    required=True,
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Seconds to wait for the rollout to finish before giving up (exit 4).",
)
@_poll_interval(5.0)
@click.option("--dry-run", is_flag=True, help="Server-side dry run of the patch; no wait.")
@_kube
@_incident
def rollout_restart_command(
    namespace: str,
    daemonset: str,
    image: str | None,
    container: str,
    timeout: float,
    poll_interval: float,
    dry_run: bool,
    kubeconfig: str | None,
    context: str | None,
    incident: str | None,
) -> None:
    """Restart a DaemonSet (as `kubectl rollout restart`) and wait for the rollout.

    \b
    Stamps the pod template annotation kubectl.kubernetes.io/restartedAt and, with
    --image, sets the image of the init container --container (the GPU warmup
    pre-pulls the inference image that way) in one strategic merge patch. Then
    waits as `kubectl rollout status` does: observedGeneration reaches the new
    generation, every desired pod is updated, and every one is available.

    \b
    Refused before any change (exit 3): the DaemonSet does not exist, its
    updateStrategy is OnDelete, or it has no init container named --container.
    Outcomes: rolled_out (0), would_restart (--dry-run, 0), timeout (4; the
    restart was made, the rollout is still going: see "detail").
    """

    def body() -> tuple[ExitCode, dict[str, Any]]:
        from kubernetes import client

        from remediator.steps import rollout
        from remediator.steps.kube import api_client

        apps = client.AppsV1Api(api_client(kubeconfig, context))
        stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        generation = rollout.restart(apps, namespace, daemonset, image, container, stamp, dry_run)
        fields: dict[str, Any] = {"dry_run": dry_run, "restarted_at": stamp, "image": image}
        if dry_run:
            return ExitCode.OK, {**fields, "outcome": "would_restart", "action_taken": False}
        log("patched", generation=generation, image=image)
        last = rollout.wait(
            apps,
            namespace,
            daemonset,
            generation,
            timeout,
            poll_interval,
            time.monotonic,
            time.sleep,
            lambda p: log(p.message, rollout_done=p.done),
        )
        fields = {**fields, "action_taken": True, "generation": generation}
        if last.done:
            return ExitCode.OK, {**fields, "outcome": "rolled_out", "detail": last.message}
        detail = f"not rolled out after {timeout:g} s: {last.message}"
        return ExitCode.TIMEOUT, {**fields, "outcome": "timeout", "detail": detail}

    target = {"namespace": namespace, "daemonset": daemonset}
    _run("rollout-restart", incident, target, body)


@step.command("cordon-node", epilog=EXIT_CODES_HELP)
@_name("--node", "Node name.")
@click.option("--dry-run", is_flag=True, help="Ask the API server to check, not to cordon.")
@_kube
@_incident
def cordon_node_command(
    node: str, dry_run: bool, kubeconfig: str | None, context: str | None, incident: str | None
) -> None:
    """Mark a node unschedulable (spec.unschedulable=true, as `kubectl cordon`).

    \b
    Used only when the policy enables cordoning for GPU memory that never settles.
    Pods already running stay; nothing new lands there until someone uncordons.
    Outcomes: cordoned, already_cordoned, would_cordon (all exit 0); a node that
    does not exist is exit 3.
    """

    def body() -> tuple[ExitCode, dict[str, Any]]:
        from kubernetes import client

        from remediator.steps.cordon import cordon
        from remediator.steps.kube import api_client

        done = cordon(client.CoreV1Api(api_client(kubeconfig, context)), node, dry_run)
        return ExitCode.OK, _fields(done, dry_run=dry_run)

    _run("cordon-node", incident, {"node": node}, body)


MAX_HEDGE_S = 3600.0  # the hedge-stalled-pod template's activeDeadlineSeconds leaves room


@step.command("hedge-pod", epilog=EXIT_CODES_HELP)
@_namespace
@_name("--deployment", "The Deployment the stalled pod belongs to: it is surged by one.")
@_name("--pod", "Stalled pod.")
@_uid("metadata.uid of the stalled pod instance (the one the decision saw).")
@click.option(
    "--timeout",
    default=1800.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True, max=MAX_HEDGE_S),
    metavar="S",
    help="Seconds to wait for either pod to be Ready; then the Deployment returns to its "
    "count, nothing deleted (exit 4). Counted from the surge, across reruns.",
)
@_poll_interval(2.0)
@click.option("--dry-run", is_flag=True, help="Server-side dry run of the surge; no wait.")
@_kube
@_incident
def hedge_pod_command(
    namespace: str,
    deployment: str,
    pod: str,
    uid: str,
    timeout: float,
    poll_interval: float,
    dry_run: bool,
    kubeconfig: str | None,
    context: str | None,
    incident: str | None,
) -> None:
    """Hedge a stalled pod: surge its Deployment by one; the first of the two
    pods Ready wins, the other is deleted, the Deployment returns to its count.

    \b
    Safe to rerun: the surge and what it is for go in one patch, as an entry of
    the Deployment's annotation remediator.io/hedge (the stalled pod, the count
    to return to, the pods from before, the deadline); a rerun finds it and
    carries on, never surging twice. The end returns the count by one, drops
    the entry and adds the pod to remediator.io/hedged in one patch: a rerun
    after it does nothing. A count someone else changed meanwhile is left.
    Other stalled pods of the Deployment may be hedged at once, each by its own
    step: each new pod races for one of them.

    \b
    Outcomes (exit 0 unless said):
      hedged_stalled_won   the stalled pod became Ready first; the hedge pod deleted
      hedged_hedge_won     a new pod became Ready first; the stalled pod deleted
      hedged_stalled_gone  the stalled pod went (deleted once hung); nothing deleted
      timeout              neither Ready by --timeout; nothing deleted (exit 4)
      already_hedged       this pod's hedge has ended before
      already_gone, replaced, spared   the pod is gone, another instance, or Ready:
                           nothing surged
      would_hedge          --dry-run: the surge would go through
    Refused before any change (exit 3): no such Deployment, one rolling out or
    paused, one selecting pods by expressions, or one whose count someone
    changed while it hedges other pods.
    """

    def body() -> tuple[ExitCode, dict[str, Any]]:
        from kubernetes import client

        from remediator.steps import hedge
        from remediator.steps.kube import api_client

        api = api_client(kubeconfig, context)
        apis = hedge.Apis(client.AppsV1Api(api), client.CoreV1Api(api))
        clock = hedge.Clock(time.time, time.sleep, poll_interval)
        done = hedge.hedge(apis, namespace, deployment, pod, uid, timeout, clock, dry_run,
                           lambda what: log(what))  # fmt: skip
        fields = _fields(done, "winner", "deleted", "replicas", dry_run=dry_run)
        return (ExitCode.TIMEOUT if done.outcome == "timeout" else ExitCode.OK), fields

    target = {"namespace": namespace, "deployment": deployment, "pod": pod, "uid": uid}
    _run("hedge-pod", incident, target, body)


@step.command("end-hedge", epilog=EXIT_CODES_HELP)
@_namespace
@_name("--deployment", "The Deployment hedge-pod surged.")
@_uid("metadata.uid of the stalled pod whose hedge to end.")
@_kube
@_incident
def end_hedge_command(
    namespace: str,
    deployment: str,
    uid: str,
    kubeconfig: str | None,
    context: str | None,
    incident: str | None,
) -> None:
    """End a hedge that hedge-pod left running (its workflow failed): return the
    Deployment to its count and drop the annotation, deleting nothing.

    \b
    The hedge-stalled-pod workflow's exit handler, so no surge outlives it.
    Outcomes: given_up (the hedge of --uid was running: ended), nothing_to_end
    (none runs, or another pod's: left alone); both exit 0.
    """

    def body() -> tuple[ExitCode, dict[str, Any]]:
        from kubernetes import client

        from remediator.steps import hedge
        from remediator.steps.kube import api_client

        apps = client.AppsV1Api(api_client(kubeconfig, context))
        done = hedge.give_up(apps, namespace, deployment, uid)
        return ExitCode.OK, _fields(done, "replicas")

    _run("end-hedge", incident, {"namespace": namespace, "deployment": deployment, "uid": uid},
         body)  # fmt: skip


@step.command("verify-gpu-memory", epilog=EXIT_CODES_HELP)
@click.option(
    "--samples",
    type=click.IntRange(min=2),
    metavar="K",
    help="How many times to run nvidia-smi (default 10). With --from-file: judge "
    "the last K samples of the recording (default: all of it).",
)
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="S",
    help="Seconds between samples.",
)
@click.option(
    "--max-spread-mib",
    default=256.0,
    show_default=True,
    type=click.FloatRange(min=0),
    metavar="M",
    help="Largest max-min of memory.used over the window that still counts as settled.",
)
@click.option(
    "--max-rise-mib",
    type=click.FloatRange(min=0),
    metavar="R",
    help="Largest last-minus-first rise over the window (default M/2): "
    "a window that is still climbing has not settled.",
)
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Judge a recorded nvidia-smi CSV instead of sampling live.",
)
@click.option(
    "--columns",
    default="index,uuid,memory.used,memory.total",
    show_default=True,
    help="Column layout of --from-file lines before any header line "
    "(e.g. timestamp,index,memory.used,memory.total,utilization.gpu).",
)
@click.option(
    "--nvidia-smi",
    "nvidia_smi",
    default="nvidia-smi",
    show_default=True,
    envvar="NVIDIA_SMI",
    metavar="PATH",
    help="nvidia-smi to run [env NVIDIA_SMI].",
)
@click.option(
    "--node", envvar="NODE_NAME", metavar="NAME", help="Node name for the verdict [env NODE_NAME]."
)
@click.option(
    "--report-to",
    envvar="REMEDIATOR_EVENTS_URL",
    metavar="URL",
    help="Also POST the verdict to remediator's /events as a CloudEvent "
    "(io.remediator.gpu-verdict), so it can tell on-call and cordon if its policy says so. "
    "Needs --node. A failed post is "
    "logged and does not change the exit code [env REMEDIATOR_EVENTS_URL].",
)
@click.option(
    "--report-token",
    envvar="REMEDIATOR_WEBHOOK_TOKEN",
    metavar="TOKEN",
    help="Bearer token for --report-to; give it through the environment (or "
    "REMEDIATOR_WEBHOOK_TOKEN_FILE), never on a command line [env REMEDIATOR_WEBHOOK_TOKEN].",
)
@_incident
def verify_gpu_memory_command(
    samples: int | None,
    interval: float,
    max_spread_mib: float,
    max_rise_mib: float | None,
    from_file: Path | None,
    columns: str,
    nvidia_smi: str,
    node: str | None,
    report_to: str | None,
    report_token: str | None,
    incident: str | None,
) -> None:
    """Decide whether each GPU's memory has settled (exit 0) or not (exit 1).

    \b
    Runs `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total
    --format=csv,noheader,nounits` K times, S seconds apart, and judges each GPU
    over that window. A GPU is stable when:
      - every sample saw it, with a readable value (not "[N/A]"),
      - its UUID and memory.total did not change,
      - memory.used moved by at most M MiB (max - min), and
      - the window does not end more than R MiB above its start (still rising).
    The verdict lists each GPU with its reasons, min/max/first/last MiB.
    Exit 5 ("error") when nothing could be judged: nvidia-smi missing or failing,
    unreadable lines, no GPU at all. That is a tooling fault, not instability.
    """
    from remediator.steps.verify import run_verify

    if report_to and not node:
        raise click.UsageError("--report-to needs --node (or NODE_NAME): the verdict names it")

    def body() -> tuple[ExitCode, dict[str, Any]]:
        code, fields = run_verify(
            samples, interval, max_spread_mib, max_rise_mib, from_file, columns, nvidia_smi
        )
        if report_to and node and code in (ExitCode.OK, ExitCode.UNSTABLE):
            fields["reported"] = _report(report_to, report_token, node, incident, fields)
        return code, fields

    _run("verify-gpu-memory", incident, {"node": node}, body)


def _report(
    url: str, token: str | None, node: str, incident: str | None, fields: dict[str, Any]
) -> bool:
    from remediator.steps import report_back

    event = report_back.cloudevent(node, incident, fields)
    try:
        status = report_back.post(url, event, token or report_back.token_from_file())
    except OSError as e:
        log("verdict not reported", level=30, url=url, error=str(e))
        return False
    if status >= 300:
        log("verdict not accepted", level=30, url=url, status=status)
        return False
    log("verdict reported", url=url, status=status)
    return True
