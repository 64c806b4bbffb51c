"""The `remediator` command line. Subcommands live beside what they drive."""

from __future__ import annotations

import click

from remediator import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="remediator")
def main() -> None:
    """Self-healing for LLM inference on Kubernetes.

    \b
    Sees each inference pod's cold start phase by phase (scheduling, image pull,
    container start, engine init, first token), exports it to Prometheus, and acts
    through Argo Workflows when a pod is stuck or GPU nodes go cold, behind
    guardrails (dedup, cooldown, blast radius, rate limit, dry-run, kill switch).

    \b
    Start here:
      remediator replay examples/incident-70b.jsonl      # see a recorded incident
      remediator replay --output json FILE               # machine-readable
      remediator serve --help                            # the live service
      remediator step --help                             # the commands workflow steps run
      remediator slo-report --prometheus URL             # cold-start SLOs over 7 days
    """


def _register() -> None:
    from remediator.replay import replay_command
    from remediator.serve import serve
    from remediator.slo.cli import slo_report
    from remediator.steps.cli import step
    from remediator.streams.cli import ingest, worker

    main.add_command(replay_command)
    main.add_command(serve)
    main.add_command(slo_report)
    main.add_command(step)
    main.add_command(worker)
    main.add_command(ingest)


_register()
