"""Engine init split into vLLM's own steps, from the log lines that end them.

Facts only narrow here too: each step keeps the times its line was seen (every tensor-parallel
worker logs it; the engine moves on when the last one has), so inputs in any order give the
same steps. A step lasts from the previous step's line, or the container's start, to its own;
lines from before the container run that became Ready (a restart's) are left out.

Ray's de-duplicated reprints arrive late (minutes, when the engine is quiet) but say when the
other workers wrote them, in vLLM's clock: the container's local time. The pod's other lines
give that zone (vLLM's clock against the kubelet's, to the quarter hour); until one has, UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import inf
from typing import Final

from remediator.inputs.records import EngineStep
from remediator.inputs.vllm_log import (
    COMPILE_MISSED,
    COMPILE_STARTED,
    ENDS_BEFORE,
    ENGINE_READY,
    ENGINE_STARTED,
    GRAPH_MEMORY,
    KV_CACHE_EXTENDED,
    KV_CACHE_STARTED,
    MARKS,
    SERVER_STARTED,
    STEPS,
)

UNTIL_READY: Final = "until_ready"  # the last step's line to Ready: what no line accounts for
TIMELINE_STEPS: Final = (*STEPS, UNTIL_READY)
# The container's start to the engine's first step line: imports, config, the workers' start
# and NCCL init, where vLLM logs no step (its banner, ENGINE_STARTED, comes before NCCL init).
# Judged only where the banner says the log is read from the start; it overlaps `weights`
# (which also runs from the container's start), so it is no step of `durations`.
BEFORE_FIRST_STEP: Final = "before_first_step"
# The container's start to the engine's banner: imports, the engine's config, nothing of the
# GPUs yet. No line ends it but the banner, so it is no step of `durations`; a pod's time
# here tells its pace before its first step line (policy.pace), where nothing else does.
TO_BANNER: Final = "to_banner"
# The lines that end the stretch before the first step: any mark of vLLM's but its banner.
_STEP_LINES: Final = frozenset(m for m in MARKS if m != ENGINE_STARTED)
# Each step's marks: its own line and the lines that start the step after it.
_MARKS_OF: Final = {
    step: (step, *(m for m, ends in ENDS_BEFORE.items() if ends == step))
    for step in (*STEPS, *ENDS_BEFORE, COMPILE_STARTED, COMPILE_MISSED, SERVER_STARTED)
}
# The steps whose end a mark's line can move (`_forget`): those it is a mark of (a step not
# in `_MARKS_OF` has only its own line).
_MOVES: Final = {
    mark: tuple(step for step, marks in _MARKS_OF.items() if mark in marks)
    for mark in {m for marks in _MARKS_OF.values() for m in marks}
}
# Lines whose ends depend on each other's (`_counts`): one of them seen forgets every end.
_ENTANGLED: Final = frozenset({"memory_profiling", "cuda_graphs", KV_CACHE_STARTED})
_MAX_TIMES: Final = 32  # per step: TP workers × a few restarts; bounded memory on a chatty pod
_QUARTER_HOUR: Final = 900.0  # time zones are whole quarter hours from UTC
_PROFILING: Final = STEPS.index("memory_profiling")


@dataclass(slots=True)
class EngineSteps:
    seen: dict[str, list[float]] = field(default_factory=dict)
    reported: dict[str, float] = field(default_factory=dict)  # what vLLM measured, by step
    detail: dict[str, str] = field(default_factory=dict)  # "7.68 GiB", "1,587,648 tokens"
    exported: int = 0  # bitmask over TIMELINE_STEPS already observed in the histogram
    reprinted: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # logged, at
    zones: dict[float, int] = field(default_factory=dict)  # kubelet − vLLM clock → lines
    # memory profiling's lines that size the KV cache: "Available KV cache memory", or "reserved
    # ... for KV Cache as specified" (--kv-cache-memory-bytes, no profiling)
    sized: list[float] = field(default_factory=list)
    # end()'s answers since the last line seen: the policy asks for the same ends many times
    # per line (each step's, the last one's, the current step's), and only see() changes them.
    # Those with no `until` (most) by step alone, with the run's start they were for: a key
    # tuple per ask cost more than the rest of the lookup.
    _ends: dict[str, tuple[float | None, float | None]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _ends_until: dict[tuple[str, float | None, float], float | None] = field(
        default_factory=dict, repr=False, compare=False
    )
    # judged()'s answer since the last line seen, and the run it was for: asked three times
    # per line (the node's pace learned, the pod's own pace, the stall's)
    _judged: tuple[float | None, dict[str, float]] | None = field(
        default=None, repr=False, compare=False
    )

    def see(self, item: EngineStep) -> None:
        self._forget(item)
        self._judged = None
        if item.reprint and item.logged is not None:
            copies = self.reprinted.setdefault(item.step, [])
            if (item.logged, item.at) not in copies and len(copies) < _MAX_TIMES:
                copies.append((item.logged, item.at))
        else:
            _keep(self.seen.setdefault(item.step, []), item.at)
            if item.step == "memory_profiling" and item.detail:
                _keep(self.sized, item.at)  # the KV cache's size known: its allocation next
            if item.logged is not None:
                zone = round((item.at - item.logged) / _QUARTER_HOUR) * _QUARTER_HOUR
                if zone in self.zones or len(self.zones) < _MAX_TIMES:
                    self.zones[zone] = self.zones.get(zone, 0) + 1
        if item.reported_s is not None:  # the slowest worker's
            self.reported[item.step] = max(self.reported.get(item.step, 0.0), item.reported_s)
        if item.detail:
            step = "kv_cache" if item.step == KV_CACHE_STARTED else item.step  # its size
            old = self.detail.get(step)
            self.detail[step] = item.detail if old is None else _pick(step, old, item.detail)

    def _forget(self, item: EngineStep) -> None:
        """The ends this line can change: its own mark's steps'; every end where it may move
        the pod's zone (a reprint is placed by it) or is itself a reprint."""
        if not self._ends and not self._ends_until:
            return
        if item.reprint or item.step in _ENTANGLED or (self.reprinted and item.logged is not None):
            self._ends.clear()
            self._ends_until.clear()
            return
        mark = item.step
        for step in _MOVES.get(mark, (mark,)):
            self._ends.pop(step, None)
        for key in [k for k in self._ends_until if mark in _MARKS_OF.get(k[0], (k[0],))]:
            del self._ends_until[key]

    def end(self, step: str, started: float | None, until: float | None) -> float | None:
        """The last time the step's line, or a line that starts the next step, was seen in
        this run (the slowest worker's)."""
        if until is None:
            known = self._ends.get(step)
            if known is not None and known[0] == started:
                return known[1]
            found = self._end(step, started, None)
            self._ends[step] = (started, found)
            return found
        key = (step, started, until)
        if key in self._ends_until:
            return self._ends_until[key]
        found = self._end(step, started, until)
        self._ends_until[key] = found
        return found

    def _end(self, step: str, started: float | None, until: float | None) -> float | None:
        last: float | None = None
        for mark in _MARKS_OF.get(step, (step,)):
            for t in self._times(mark):
                after, before = started is None or t >= started, until is None or t <= until
                later = last is None or t > last
                if after and before and later and self._counts(step, mark, t, started):
                    last = t
        return last

    def _counts(self, step: str, mark: str, t: float, started: float | None) -> bool:
        """Whether a line at `t` ends `step`. Two lines say something else in some releases:
        - "Graph capturing finished" before the KV cache was sized is memory profiling's
          estimate of the graphs' memory (V2 model runner, 0.29 to 0.33: it captures them
          once to measure), not the capture, which needs the cache allocated;
        - "GPU KV cache size" after the capture is the cache's final size, measured after
          warm-up (0.34's extensible KV cache), not the end of memory profiling."""
        if mark == "cuda_graphs":
            return not self._estimate(t, started)
        if mark == KV_CACHE_STARTED and step == "memory_profiling":
            return not any(
                c <= t and not self._estimate(c, started) for c in self._run("cuda_graphs", started)
            )
        return True

    def _estimate(self, t: float, started: float | None) -> bool:
        """A capture line at `t` is memory profiling's estimate: this run profiles memory
        and nothing sized the KV cache at or before it."""
        if not self._run("memory_profiling", started):
            return False  # (an excerpt, or a release that profiles nothing: a capture)
        sizing = (*_since(self.sized, started), *self._run(KV_CACHE_STARTED, started))
        return not any(s <= t for s in sizing)

    def _run(self, mark: str, started: float | None) -> list[float]:
        """The mark's times in this run (since the container started)."""
        return _since(self._times(mark), started)

    def _times(self, mark: str) -> list[float]:
        """When the mark's lines were written: a reprint's own time, in the pod's zone."""
        seen = self.seen.get(mark)
        copies = self.reprinted.get(mark)
        if not copies:
            return seen or []  # (read only)
        times = list(seen or ())
        if copies:
            zone = self._zone()
            times.extend(min(at, logged + zone) for logged, at in copies)
        return times

    def _zone(self) -> float:
        """UTC minus the container's local time (what vLLM writes), as most lines say."""
        if not self.zones:
            return 0.0
        return min(self.zones, key=lambda z: (-self.zones[z], z))

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

    def judged(self, started: float | None) -> dict[str, float]:
        """The steps this run ended, by the step whose siblings' times judge them: a compile
        that missed its cache as COMPILE_MISSED (minutes, where a hit takes seconds). Shared
        until the next line: read it, never change it."""
        known = self._judged
        if known is not None and known[0] == started:
            return known[1]
        ended = self.durations(started, None)
        if "torch_compile" in ended and self.compile_missed(started):
            ended = {COMPILE_MISSED if s == "torch_compile" else s: v for s, v in ended.items()}
        self._judged = (started, ended)
        return ended

    def first_step(self, started: float | None) -> float | None:
        """When this run's first step line was written (its first worker's): the end of the
        stretch before the first step; None while only the banner (or nothing) is seen."""
        first: float | None = None
        # (over the marks seen, not every mark: the policy asks this on most lines of a pod
        # that has logged only its banner)
        marks = self.seen.keys() | self.reprinted.keys() if self.reprinted else self.seen
        for mark in marks:
            if mark not in _STEP_LINES:
                continue
            for t in self._times(mark):
                if (started is None or t >= started) and (first is None or t < first):
                    first = t
        return first

    def banner(self, started: float | None) -> float | None:
        """When this run's engine printed its banner; None where it is not seen."""
        return self.end(ENGINE_STARTED, started, None)

    def before_first_step(self, started: float | None) -> bool:
        """This run's banner is seen and no step line after it: the engine is starting its
        workers and NCCL, and the log is known to be read (silence is then the engine's)."""
        if started is None or self.banner(started) is None:
            return False
        return self.first_step(started) is None

    def compile_missed(self, started: float | None) -> bool:
        """torch.compile missed its cache in this run: it compiles, for minutes."""
        return self.end(COMPILE_MISSED, started, None) is not None

    def last_end(self, started: float | None) -> tuple[str, float] | None:
        """The last step that ended in this run, and when (the later step on a tie)."""
        last: tuple[str, float] | None = None
        for step in STEPS:
            end = self.end(step, started, None)
            if end is not None and (last is None or end >= last[1]):
                last = (step, end)
        return last

    def current(self, started: float | None) -> str:
        """The step the engine is in now: the one after the last line seen."""
        return self.current_after(self.last_end(started), started)

    def current_after(self, ended: tuple[str, float] | None, started: float | None) -> str:
        """`current`, given what `last_end(started)` answered (a caller that has it already:
        the policy asks for both on every step line)."""
        last, last_at = ended if ended is not None else (None, float("-inf"))
        serving = self.end(SERVER_STARTED, started, None)
        if last == "api_server" or (serving is not None and serving >= last_at):
            return "api_server"  # logged complete, not Ready yet: the readiness probe
        if self.compiling_after(ended, started):
            return "torch_compile"
        if self.profiling_graphs_after(ended, started):
            return "memory_profiling"
        if self.extending_after(ended, started):
            return "cuda_graphs"
        if last is None:
            return BEFORE_FIRST_STEP if self.before_first_step(started) else "weights"
        following = STEPS[STEPS.index(last) + 1 :]
        return next(s for s in following if s != "torch_compile")

    def compiling_after(self, ended: tuple[str, float] | None, started: float | None) -> bool:
        """A compile began after the last step's line (`ended`, as `last_end` answers): the
        model's after its weights, or a part compiled after the model's profiling run (a
        draft head, an encoder: their compiles follow it, and may miss their cache too). On a
        tie (a log without its clock, lines in one second) a compile follows only the steps
        it follows in vLLM's order: the weights and the profiling run."""
        compiling = self.end(COMPILE_STARTED, started, None)
        if compiling is None:
            return False
        if ended is None:
            return True
        last, last_at = ended
        return compiling > last_at or (
            compiling == last_at and last in ("weights", "memory_profiling")
        )

    def profiling_graphs_after(
        self, ended: tuple[str, float] | None, started: float | None
    ) -> bool:
        """Memory profiling measures the CUDA graphs' memory after the last step's line
        (`ended`): V1 logs its profiling run's end, then captures a few graphs to measure
        them (`Profiling CUDA graph memory`; the V2 runner's capture line before the cache
        is sized, `_estimate`), and sizes the KV cache only after; until then the engine is
        still profiling memory, not allocating the cache. A line of it at the profiling
        run's second counts unless the cache was sized at or after it (its workers' lines
        interleave)."""
        if ended is not None and STEPS.index(ended[0]) > _PROFILING:
            return False  # (most lines: asked on every one)
        times = [t for t in self._run("cuda_graphs", started) if self._estimate(t, started)]
        measured = self.end(GRAPH_MEMORY, started, None)
        if measured is not None:
            times.append(measured)
        if not times:
            return False
        graphs = max(times)
        if ended is not None and graphs < ended[1]:
            return False
        sizing = (*_since(self.sized, started), *self._run(KV_CACHE_STARTED, started))
        return not any(s >= graphs for s in sizing)

    def extending_after(self, ended: tuple[str, float] | None, started: float | None) -> bool:
        """0.34's extensible KV cache sizes and grows the cache after the graphs' capture
        line (`ended`), before `init engine ... took`: the engine is still in the stretch
        that line ends, cuda_graphs' (it read as starting its API server)."""
        if ended is None or ended[0] != "cuda_graphs":
            return False
        capture, ready = ended[1], self.end(ENGINE_READY, started, None)
        sized = self.end(KV_CACHE_STARTED, started, None)  # (on a tie, V0's: before capture)
        extended = self.end(KV_CACHE_EXTENDED, started, None)  # only ever after it
        last = max(
            (sized if sized is not None and sized > capture else -inf),
            (extended if extended is not None and extended >= capture else -inf),
        )
        return last > -inf and (ready is None or ready < last)  # (init's line follows them)


def _since(times: list[float], started: float | None) -> list[float]:
    """The times of this run: at or after the container's start."""
    return [t for t in times if started is None or t >= started]


def _keep(times: list[float], at: float) -> None:
    """Add a time a mark was seen; past the bound, the newest replace the oldest (a compile
    ends with its last graph, and vLLM compiles dozens: spans mark each one)."""
    if at in times:
        return
    if len(times) < _MAX_TIMES:
        times.append(at)
        return
    oldest = min(times)
    if at > oldest:
        times[times.index(oldest)] = at


def _pick(step: str, a: str, b: str) -> str:
    """Of two details of one step (TP workers', a restart's), the one that tells: the KV cache
    memory the engine sizes its cache by is its workers' least ("-3.86 GiB" when one has none
    left); every other figure, the largest. By value: as text, "9.90" > "18.38"."""
    smaller = _figure(b) < _figure(a)
    return b if smaller == (step == "memory_profiling") and _figure(a) != _figure(b) else a


def _figure(detail: str) -> float:
    head = detail.split(" ", 1)[0].replace(",", "")
    try:
        return float(head)
    except ValueError:
        return float("-inf")


def step_note(steps: EngineSteps | None, started: float | None, now: float) -> str:
    """`stalled in cuda_graphs for 212s (after kv_cache)`: for decisions and alerts."""
    if steps is None or not steps.seen:
        return ""
    step = steps.current(started)
    ends = [t for s in STEPS for t in [steps.end(s, started, None)] if t is not None]
    since = max(ends) if ends else started
    for_s = f" for {now - since:.0f}s" if since is not None else ""
    return f"; stalled in vLLM step {step}{for_s}"
