"""The first-token probe (opt-in): once an inference pod is Ready, one streaming 1-token
completion to its OpenAI-compatible endpoint; the first streamed token closes its timeline.

    POST http://POD_IP:PORT/v1/completions
    {"model": M, "prompt": "Hello", "max_tokens": 1, "stream": true, "temperature": 0}

Port, path and model come from the pod (`--port`, `--served-model-name`, else `--model`) or
the policy (first_token_probe). Never more than `max_concurrent` probes at once, each within
`timeout_s`; a failed probe is retried `attempts` times, `retry_s` apart, then given up and
said so. Where the pod serves vLLM's /metrics, `vllm:time_to_first_token_seconds` (the
engine's own measure of the same request) is read back to confirm it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aiohttp
import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from remediator.inputs.records import FirstToken, Input
from remediator.logfields import get_logger
from remediator.metrics.timeline_metrics import COLD_START_BUCKETS
from remediator.policy.config import FirstTokenProbeConfig
from remediator.timeline.model import PodTimeline

log = get_logger(__name__)

Deliver = Callable[[list[Input]], None]  # called on the loop's thread
PROMPT = "Hello"
_FORGET_AFTER = 4096


class ProbeFailed(Exception):
    def __init__(self, result: str, detail: str) -> None:
        super().__init__(f"{result}: {detail}")
        self.result = result


@dataclass(frozen=True, slots=True)
class ProbeMetrics:
    probes: Counter
    seconds: Histogram

    @classmethod
    def on(cls, registry: CollectorRegistry) -> ProbeMetrics:
        return cls(
            probes=Counter(
                "remediator_first_token_probes_total",
                "First-token probes by result (ok, http_error, refused, timeout, bad_stream, "
                "gave_up).",
                ["result"],
                registry=registry,
            ),
            seconds=Histogram(
                "remediator_first_token_probe_seconds",
                "A probe's own time to first token (request sent to first streamed token).",
                ["model"],
                buckets=COLD_START_BUCKETS,
                registry=registry,
            ),
        )


@dataclass(frozen=True, slots=True)
class Answer:
    sent: float
    first_token: float
    engine_ttft_s: float | None  # vllm:time_to_first_token_seconds, when readable


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    base: str  # http://ip:port, for /metrics
    model: str


class FirstTokenProber:
    def __init__(
        self,
        cfg: FirstTokenProbeConfig,
        deliver: Deliver,
        metrics: ProbeMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._cfg = cfg
        self._deliver = deliver
        self._metrics = metrics
        self._clock = clock
        self._running: dict[str, asyncio.Task[None]] = {}
        self._tries: dict[str, tuple[int, float]] = {}  # uid → (attempts made, next try at)
        self._finished: set[str] = set()
        self._http: aiohttp.ClientSession | None = None
        self.answers: dict[str, Answer] = {}  # uid → the last successful probe (for people)

    def target(self, t: PodTimeline) -> Target | None:
        ep = t.endpoint
        model = self._cfg.model or (ep.model if ep is not None else None)
        if ep is None or not ep.ip or not model:
            return None
        port = ep.port or self._cfg.port
        host = f"[{ep.ip}]" if ":" in ep.ip else ep.ip
        base = f"http://{host}:{port}"
        return Target(base + self._cfg.path, base, model)

    def sync(self, ready_without_first_token: list[PodTimeline]) -> None:
        """From the loop, about once a second: probe these pods, within the bounds."""
        now = self._clock()
        for t in ready_without_first_token:
            if len(self._running) >= self._cfg.max_concurrent:
                break
            uid = t.uid
            made, due = self._tries.get(uid, (0, 0.0))
            if uid in self._running or uid in self._finished or due > now:
                continue
            target = self.target(t)
            if target is None:
                continue
            self._tries[uid] = (made + 1, now + self._cfg.retry_s)
            task = asyncio.get_running_loop().create_task(self._probe(t, target, made + 1))
            self._running[uid] = task
            task.add_done_callback(self._forget(uid))
        if len(self._finished) > _FORGET_AFTER:
            self._finished.clear()

    def _forget(self, uid: str) -> Callable[[asyncio.Task[None]], None]:
        def done(_task: asyncio.Task[None]) -> None:
            self._running.pop(uid, None)

        return done

    async def _probe(self, t: PodTimeline, target: Target, attempt: int) -> None:
        fields = {"pod": f"{t.namespace}/{t.name}", "url": target.url, "attempt": attempt}
        try:
            answer = await self.ask(target)
        except ProbeFailed as exc:
            self._metrics.probes.labels(exc.result).inc()
            last = attempt >= self._cfg.attempts
            if last:
                self._finished.add(t.uid)
                self._metrics.probes.labels("gave_up").inc()
            log.warning(
                "first-token probe failed" + ("; giving up" if last else ""),
                extra={**fields, "error": str(exc)},
            )
            return
        self._finished.add(t.uid)
        self.answers[t.uid] = answer
        self._metrics.probes.labels("ok").inc()
        self._metrics.seconds.labels(target.model).observe(answer.first_token - answer.sent)
        log.info(
            "first token",
            extra={
                **fields,
                "probe_ttft_s": round(answer.first_token - answer.sent, 3),
                "engine_ttft_s": answer.engine_ttft_s,
            },
        )
        self._deliver([FirstToken(t.namespace, t.name, t.uid, answer.first_token)])

    async def ask(self, target: Target) -> Answer:
        """One streaming 1-token completion; the time its first token arrived."""
        http = self._session()
        body = {
            "model": target.model,
            "prompt": PROMPT,
            "max_tokens": 1,
            "stream": True,
            "temperature": 0,
        }
        timeout = aiohttp.ClientTimeout(total=self._cfg.timeout_s)
        sent = self._clock()
        try:
            async with http.post(target.url, json=body, timeout=timeout) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200]
                    raise ProbeFailed("http_error", f"HTTP {resp.status}: {text}")
                first = await self._first_token(resp)
        except TimeoutError:
            raise ProbeFailed("timeout", f"no first token in {self._cfg.timeout_s:g}s") from None
        except aiohttp.ClientConnectionError as exc:
            raise ProbeFailed("refused", repr(exc)) from None
        return Answer(sent, first, await self._engine_ttft(target))

    async def _first_token(self, resp: aiohttp.ClientResponse) -> float:
        """Server-sent events: the first `data:` event carrying a choice is the first token."""
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            try:
                doc = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise ProbeFailed("bad_stream", f"not JSON: {payload[:100]!r}") from None
            if isinstance(doc, dict) and doc.get("choices"):
                return self._clock()
            if isinstance(doc, dict) and "error" in doc:
                raise ProbeFailed("http_error", str(doc["error"])[:200])
        raise ProbeFailed("bad_stream", "the stream ended without a token")

    async def _engine_ttft(self, target: Target) -> float | None:
        """vLLM's own TTFT histogram: its mean, when the pod serves /metrics."""
        try:
            timeout = aiohttp.ClientTimeout(total=min(self._cfg.timeout_s, 5.0))
            async with self._session().get(target.base + "/metrics", timeout=timeout) as r:
                if r.status != 200:
                    return None
                text = await r.text()
        except (aiohttp.ClientError, TimeoutError):
            return None
        total = count = 0.0
        for family in text_string_to_metric_families(text):
            if family.name != "vllm:time_to_first_token_seconds":
                continue
            for s in family.samples:
                if s.name.endswith("_sum"):
                    total += s.value
                elif s.name.endswith("_count"):
                    count += s.value
        return round(total / count, 4) if count else None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def close(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        if self._http is not None:
            await self._http.close()


def ready_without_first_token(
    pods: Iterable[PodTimeline], selected: Callable[[PodTimeline], bool]
) -> list[PodTimeline]:
    out = [t for t in pods if t.state() == "ready" and selected(t)]
    out.sort(key=lambda t: t.ready or 0.0)
    return out
