"""What slo-report asks Prometheus (prometheus-api-client): one instant query per figure."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

PHASE = "remediator_cold_start_phase_seconds"
STEP = "remediator_engine_init_step_seconds"
ELAPSED = "remediator_pod_phase_elapsed_seconds"
QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class Row:
    """Quantiles of one (model, phase or step) over the window."""

    model: str
    phase: str
    pods: float
    p50: float | None
    p95: float | None
    p99: float | None


class Prom:
    def __init__(self, url: str, at: float | None = None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.at = at  # evaluate as of this time (epoch seconds); None: now
        self._client = PrometheusConnect(
            url=self.url, disable_ssl=False, retry=Retry(total=1, backoff_factor=0.2)
        )
        self._timeout = timeout_s

    def _query(self, expr: str) -> list[dict[str, Any]]:
        params = {"time": f"{self.at:.3f}"} if self.at is not None else None
        result: list[dict[str, Any]] = self._client.custom_query(
            expr, params=params, timeout=self._timeout
        )
        return result

    def pin_to_last_scrape(self) -> None:
        """Evaluate as of serve's last scrape (not now): increase() then does not extrapolate
        past the data, so a short window's counts stay whole numbers."""
        if self.at is not None:
            return
        found = self._query(f"max(timestamp({PHASE}_count))")
        if found:
            self.at = _value(found[0])

    def quantile_rows(self, metric: str, by: str, window: str) -> list[Row]:
        """P50/P95/P99 and the count of each (model, `by`) over the window."""
        groups = f"model, {by}"
        counts = self._query(f"sum by ({groups}) (increase({metric}_count[{window}]))")
        found: dict[tuple[str, str], dict[str, float | None]] = {}
        for s in counts:
            key = (s["metric"].get("model", "unknown"), s["metric"].get(by, ""))
            found[key] = {"pods": _value(s)}
        for q in QUANTILES:
            expr = (
                f"histogram_quantile({q}, sum by (le, {groups}) "
                f"(increase({metric}_bucket[{window}])))"
            )
            for s in self._query(expr):
                key = (s["metric"].get("model", "unknown"), s["metric"].get(by, ""))
                if key in found:
                    found[key][f"p{round(q * 100)}"] = _finite(_value(s))
        rows = [
            Row(m, p, v["pods"] or 0.0, v.get("p50"), v.get("p95"), v.get("p99"))
            for (m, p), v in found.items()
            if (v["pods"] or 0.0) > 0
        ]
        return sorted(rows, key=lambda r: (r.model, r.phase))

    def buckets(
        self, metric: str, by: str, what: str, window: str
    ) -> dict[str, list[tuple[float, float]]]:
        """Cumulative bucket counts per model for one phase or step over the window."""
        expr = f'sum by (le, model) (increase({metric}_bucket{{{by}="{what}"}}[{window}]))'
        out: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for s in self._query(expr):
            le = float(s["metric"]["le"])
            out[s["metric"].get("model", "unknown")].append((le, _value(s)))
        return dict(out)

    def worst_pods(self, window: str, top: int) -> list[dict[str, Any]]:
        """The longest any pod was seen in one unfinished phase (sampled at each scrape)."""
        expr = (
            f"topk({top}, max by (namespace, pod, phase, model) "
            f"(max_over_time({ELAPSED}[{window}])))"
        )
        rows = [
            {
                "namespace": s["metric"].get("namespace"),
                "pod": s["metric"].get("pod"),
                "phase": s["metric"].get("phase"),
                "model": s["metric"].get("model"),
                "seconds": _value(s),
            }
            for s in self._query(expr)
        ]
        return sorted(rows, key=lambda r: -r["seconds"])


def _value(sample: dict[str, Any]) -> float:
    return float(sample["value"][1])


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None
