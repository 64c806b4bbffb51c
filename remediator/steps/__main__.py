"""`python -m remediator.steps ...`: the step commands without the rest of the CLI."""

from remediator.steps.cli import step

step(prog_name="remediator step")
