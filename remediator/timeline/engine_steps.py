"""Engine init split into vLLM's own steps, from the log lines that end them.

Facts only narrow here too: each step keeps the times its line was seen (every tensor-parallel
worker logs it; the engine moves on when the last one has), so inputs in any order give the
same steps. A step lasts from the previous step's line, or the container's start, to its own;
lines from before the container run that became Ready (a restart's) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import COMPILE_STARTED, SERVER_STARTED, STEPS

UNTIL_READY = "until_ready"  # the last step's line to Ready: what no line accounts for
TIMELINE_STEPS = (*STEPS, UNTIL_READY)
_MAX_TIMES = 32  # per step: TP workers × a few restarts; bounded memory on a chatty pod


@dataclass(slots=True)
class EngineSteps:
    seen: dict[str, list[float]] = field(default_factory=dict)
    reported: dict[str, float] = field(default_factory=dict)  # what vLLM measured, by step
    detail: dict[str, str] = field(default_factory=dict)  # "7.68 GiB", "1,587,648 tokens"
    exported: int = 0  # bitmask over TIMELINE_STEPS already observed in the histogram

    def see(self, item: EngineStep) -> None:
        times = self.seen.setdefault(item.step, [])
        if item.at not in times and len(times) < _MAX_TIMES:
            times.append(item.at)
        if item.reported_s is not None:  # the slowest worker's
            self.reported[item.step] = max(self.reported.get(item.step, 0.0), item.reported_s)
        if item.detail:
            old = self.detail.get(item.step)
            self.detail[item.step] = item.detail if old is None else max(old, item.detail)

    def end(self, step: str, started: float | None, until: float | None) -> float | None:
        """The last time the step's line was seen in this run (the slowest worker's)."""
        times = [
            t
            for t in self.seen.get(step, ())
            if (started is None or t >= started) and (until is None or t <= until)
        ]
        return max(times) if times else None

    def durations(self, started: float | None, ready: float | None) -> dict[str, float]:
        """Seconds per step, in order, for the steps whose end is known."""
        out: dict[str, float] = {}
        prev = started
        slack = ready + 1.0 if ready is not None else None  # kubelet and probe clocks differ
        for step in STEPS:
            end = self.end(step, started, slack)
            if end is None:
                continue
            if prev is not None:
                out[step] = max(0.0, end - prev)
            elif step in self.reported:
                out[step] = self.reported[step]  # the container's start is unknown
            prev = end if prev is None else max(prev, end)
        if ready is not None and prev is not None and out:
            out[UNTIL_READY] = max(0.0, ready - prev)  # readiness probe, or lines not logged
        return out

    def current(self, started: float | None) -> str:
        """The step the engine is in now: the one after the last line seen."""
        last, last_at = None, float("-inf")
        for step in STEPS:
            end = self.end(step, started, None)
            if end is not None and end >= last_at:
                last, last_at = step, end
        if (self.end(SERVER_STARTED, started, None) or float("-inf")) >= last_at:
            return "api_server"
        if last == "api_server":
            return "api_server"  # logged complete, not Ready yet: the readiness probe
        compiling = self.end(COMPILE_STARTED, started, None)
        if compiling is not None and compiling >= last_at and last in (None, "weights"):
            return "torch_compile"
        if last is None:
            return "weights"
        following = STEPS[STEPS.index(last) + 1 :]
        return next(s for s in following if s != "torch_compile")


def step_note(steps: EngineSteps | None, started: float | None, now: float) -> str:
    """`stalled in cuda_graphs for 212s (after kv_cache)`: for decisions and alerts."""
    if steps is None or not steps.seen:
        return ""
    step = steps.current(started)
    ends = [t for s in STEPS for t in [steps.end(s, started, None)] if t is not None]
    since = max(ends) if ends else started
    for_s = f" for {now - since:.0f}s" if since is not None else ""
    return f"; stalled in vLLM step {step}{for_s}"
