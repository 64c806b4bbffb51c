"""The `remediator` command line. Subcommands live beside what they drive and are
imported only when run: `remediator replay` loads none of serve's clients (kubernetes,
Argo, Slack, aiohttp)."""

from __future__ import annotations

import importlib

import click

from remediator import __version__

# name -> "module:attribute" of the click command
COMMANDS = {
    "coldstart": "remediator.coldstart.cli:coldstart",
    "replay": "remediator.replay:replay_command",
    "serve": "remediator.serve:serve",
    "simulate": "remediator.sim.fleet.cli:simulate",
    "demo": "remediator.sim.fleet.cli:demo",
    "slo-report": "remediator.slo.cli:slo_report",
    "step": "remediator.steps.cli:step",
    "worker": "remediator.streams.cli:worker",
    "ingest": "remediator.streams.cli:ingest",
}


class LazyGroup(click.Group):
    """click's documented lazy-loading group: a command is imported when it is called
    (or when --help lists it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
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
      remediator demo                                    # a simulated fleet, live
      remediator simulate examples/sim/tuned.yaml        # compare policies on a fleet
      remediator replay examples/incident-70b.jsonl      # see a recorded incident
      kubectl coldstart -n NS deploy/NAME                # where a live workload's time went
      remediator replay --output json FILE               # machine-readable
      remediator serve --help                            # the live service
      remediator step --help                             # the commands workflow steps run
      remediator slo-report --prometheus URL             # cold-start SLOs over 7 days
    """
