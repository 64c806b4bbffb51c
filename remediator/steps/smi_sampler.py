"""Sample GPU memory by running nvidia-smi K times, S seconds apart."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from remediator.steps.gpu_memory import Sample
from remediator.steps.smi_parse import QUERY_COLUMNS, ParseError, parse_rows

QUERY_ARGS: tuple[str, ...] = (
    f"--query-gpu={','.join(QUERY_COLUMNS)}",
    "--format=csv,noheader,nounits",
)
CALL_TIMEOUT_S = 30.0  # a hung driver makes nvidia-smi hang; never wait forever


class SamplerError(RuntimeError):
    """nvidia-smi could not be run or failed: we learned nothing about the GPUs."""


@dataclass(frozen=True, slots=True)
class Sampled:
    samples: tuple[Sample, ...]
    errors: tuple[ParseError, ...]


def query_once(nvidia_smi: str) -> str:
    try:
        done = subprocess.run(
            [nvidia_smi, *QUERY_ARGS],
            capture_output=True,
            text=True,
            timeout=CALL_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as e:
        raise SamplerError(f"{nvidia_smi}: not found") from e
    except PermissionError as e:
        raise SamplerError(f"{nvidia_smi}: not executable") from e
    except subprocess.TimeoutExpired as e:
        raise SamplerError(f"{nvidia_smi} did not answer within {CALL_TIMEOUT_S:g} s") from e
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[:300]
        raise SamplerError(f"{nvidia_smi} exited {done.returncode}: {said}")
    return done.stdout


def sample(
    nvidia_smi: str,
    count: int,
    interval_s: float,
    sleep: Callable[[float], None],
    on_sample: Callable[[int, Sample], None] = lambda n, s: None,
) -> Sampled:
    """`count` samples, `interval_s` apart (no sleep after the last). Each call's
    lines form one sample; line numbers in errors count across all calls."""
    samples: list[Sample] = []
    errors: list[ParseError] = []
    line = 1
    for n in range(count):
        if n:
            sleep(interval_s)
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        text = query_once(nvidia_smi)
        rows, errs = parse_rows(text, QUERY_COLUMNS, first_line=line)
        line += len(text.splitlines())
        errors += errs
        samples.append(Sample(readings=tuple(r.reading for r in rows), at=at))
        on_sample(n, samples[-1])
    return Sampled(samples=tuple(samples), errors=tuple(errors))
