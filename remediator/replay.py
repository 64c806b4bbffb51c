"""`remediator replay`: run recorded inputs through the core on a virtual clock.

The clock advances to each input's own timestamp, never backwards, so a replay decides
exactly what the live service would have decided at those times. Replay never calls a
cluster: decisions are printed, not executed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import click

from remediator.contract.errors import ConfigError
from remediator.inputs.decode import decode
from remediator.inputs.records import InputError
from remediator.inputs.timefmt import parse_time
from remediator.output import JsonOutput, Output, TextOutput
from remediator.session import Session

EXIT_SKIPPED = 1


@dataclass
class ReplayStats:
    lines: int = 0
    inputs: int = 0
    skipped: list[str] = field(default_factory=list)


_PRETTY_HINT = (
    "a pretty-printed JSON document cut short or broken "
    "(`kubectl get -o json` without -c): check it, or pipe it through `jq -c .`"
)


def _lines(paths: list[str]) -> Iterator[tuple[str, int, bytes]]:
    """One JSON document at a time: a line, or, where a line is a lone `{` or `[` (what
    `kubectl get -o json` prints, `-w` one after another), the lines up to the `}` or `]`
    that closes it at the same indentation."""
    for path in paths:
        stream: IO[bytes] = sys.stdin.buffer if path == "-" else Path(path).open("rb")  # noqa: SIM115
        with stream:
            lines = enumerate(stream, 1)
            for number, line in lines:
                stripped = line.strip()
                if stripped in (b"{", b"["):
                    yield path, number, _document(line, lines)
                elif stripped:
                    yield path, number, line


def _document(first: bytes, lines: Iterator[tuple[int, bytes]]) -> bytes:
    indent = first[: len(first) - len(first.lstrip())]
    closing = indent + (b"}" if first.strip() == b"{" else b"]")
    parts = [first]
    for _, line in lines:
        parts.append(line)
        if line.rstrip() == closing:
            break
    return b"".join(parts)


def run_replay(
    paths: list[str], session: Session, out: Output, until: float | None = None
) -> ReplayStats:
    stats = ReplayStats()
    for path, number, line in _lines(paths):
        stats.lines += 1
        try:
            items = decode(line)
        except InputError as exc:
            where = f"{path}:{number}"
            stats.skipped.append(where)
            pretty = b"\n" in line.rstrip()  # a multi-line document that did not parse
            out.error(where, f"{_PRETTY_HINT}: {exc}" if pretty else str(exc))
            continue
        for item in items:
            if until is not None and item.at is not None and item.at > until:
                continue
            stats.inputs += 1
            session.feed(item, out)
    if until is not None:
        session.advance(until, out)
    out.finish(session, stats.lines, stats.inputs, len(stats.skipped))
    return stats


@click.command("replay")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True)
)
@click.option(
    "--output",
    "-o",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: a table and bars per pod, for people. json: one object per line.",
)
@click.option(
    "--until",
    metavar="RFC3339",
    help="Stop the clock here: ignore inputs after it, report pods as they stood then.",
)
@click.option(
    "--policy",
    type=click.Path(exists=True, dir_okay=False),
    help="Policy file (YAML); the built-in defaults when absent.",
)
def replay_command(
    files: tuple[str, ...], output: str, until: str | None, policy: str | None
) -> None:
    """Replay recorded inputs (JSON Lines) through the core and show what it saw and decided.

    \b
    Each line is one input, of any kind, read in file order:
      - a Kubernetes watch event {"type": "ADDED", "object": {...}} (Pods, Events,
        Deployments, StatefulSets, DaemonSets; other kinds are ignored), or a bare
        object or List as `kubectl get -o json` prints it (pretty-printed documents are
        read whole; `jq -c` makes them one line each);
      - an Alertmanager webhook payload (version 4);
      - a CloudEvent 1.0 in structured JSON (Argo Events) wrapping any of the above;
      - {"kind": "FirstToken", "namespace", "pod", "time"} when the engine answered first;
      - {"kind": "EngineLog", "namespace", "pod", "time", "line"}: a line of the pod's log
        (vLLM's start-up steps split engine_init; "time" may lead the line as
        `kubectl logs --timestamps` prints it; lines that mark no step are ignored).

    \b
    Record a cluster for replay:
      kubectl get pods,events -n llm -w -o json --output-watch-events | jq -c . > rec.jsonl

    \b
    Exit codes: 0 all lines read; 1 some lines were skipped (each named on stderr as
    FILE:LINE with the reason); 2 bad usage or policy file.
    """
    until_ts = None
    if until is not None:
        try:
            until_ts = parse_time(until)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--until") from None
    try:
        session = Session.from_policy_file(policy)
    except ConfigError as exc:
        raise click.UsageError(f"policy file {policy}: {exc}") from None
    out: Output = JsonOutput(sys.stdout) if output == "json" else TextOutput(sys.stdout)
    try:
        stats = run_replay(list(files), session, out, until_ts)
        sys.stdout.flush()
    except BrokenPipeError:
        # `remediator replay ... | head`: the reader has what it wanted; not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    if stats.skipped:
        sys.exit(EXIT_SKIPPED)
