"""Latency SLOs: does a point meet them, and how many requests/s met every threshold (goodput).

A sweep's `slo` section sets thresholds at chosen percentiles, e.g.
    slo: {ttft_ms: {p95: 500}, itl_ms: {p50: 50}, max_error_rate: 0.01}
A point meets the SLO when each named percentile of the point is within its threshold and
its error rate is at most `max_error_rate`. Goodput counts the requests that met every
threshold individually (ttft <= 500 ms and itl <= 50 ms): that fraction of the point's
achieved request rate. `slo_ratio` is the largest measured/limit over the thresholds (above
1: missed), the margin a capacity search interpolates on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunebench.points.columns import SLO_COLUMNS

# SLO metric -> (points.csv column prefix, unit suffix, per-request sample column)
SLO_METRICS = {
    "ttft_ms": ("ttft", "ms", "ttft_ms"),
    "itl_ms": ("itl", "ms", "itl_ms"),
    "tpot_ms": ("tpot", "ms", "tpot_ms"),
    "e2e_s": ("e2e", "s", "e2e_s"),
}


@dataclass(frozen=True)
class Threshold:
    metric: str  # ttft_ms | itl_ms | tpot_ms | e2e_s
    percentile: int  # 50, 90, 95, 99
    limit: float

    @property
    def label(self) -> str:
        return f"{self.metric} p{self.percentile} <= {self.limit:g}"


def thresholds_of(slo: dict[str, Any] | None) -> list[Threshold]:
    out = []
    for metric, levels in (slo or {}).items():
        if metric in SLO_METRICS:
            for level, limit in levels.items():
                out.append(Threshold(metric, int(level.lstrip("p")), float(limit)))
    return out


def _point_value(
    row: dict[str, Any], samples: list[dict[str, Any]], threshold: Threshold
) -> float | None:
    prefix, unit, sample = SLO_METRICS[threshold.metric]
    column = f"{prefix}_p{threshold.percentile}_{unit}"
    value = row.get(column)
    if value not in (None, "") and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    values = [s[sample] for s in samples if s.get(sample) is not None]
    return float(np.percentile(values, threshold.percentile)) if values else None


def highest_quantile(slo: dict[str, Any] | None) -> float | None:
    """The highest percentile the SLO names, as a quantile (it sets how many requests a
    window needs: points/samples.py); None without latency thresholds."""
    levels = [t.percentile / 100 for t in thresholds_of(slo)]
    return max(levels) if levels else None


def slo_from_items(items: list[str]) -> dict[str, dict[str, float]]:
    """An SLO from command-line items such as "ttft_ms.p90=30" (benchmarks' --slo)."""
    slo: dict[str, dict[str, float]] = {}
    for item in items:
        key, _, limit = item.partition("=")
        metric, _, percentile = key.partition(".")
        if metric not in SLO_METRICS or not percentile.startswith("p") or not limit:
            raise ValueError(f"{item!r}: write METRIC.PCT=LIMIT, e.g. ttft_ms.p90=30")
        slo.setdefault(metric, {})[percentile] = float(limit)
    return slo


def evaluate(
    row: dict[str, Any], samples: list[dict[str, Any]], slo: dict[str, Any] | None
) -> dict[str, Any]:
    """SLO columns for one point; all None when the sweep sets no SLO."""
    thresholds = thresholds_of(slo)
    max_error_rate = (slo or {}).get("max_error_rate")
    if not thresholds and max_error_rate is None:
        return {c: None for c in SLO_COLUMNS}
    violations = []
    ratios = []  # measured / limit per threshold: the capacity search interpolates on it
    for threshold in thresholds:
        value = _point_value(row, samples, threshold)
        if value is None:
            violations.append(f"{threshold.label}: {_why_unmeasured(row)}")
            continue
        ratios.append(value / threshold.limit)
        if value > threshold.limit:
            violations.append(f"{threshold.label}: {value:.4g}")
    ok, failed = int(row.get("requests_ok") or 0), int(row.get("requests_failed") or 0)
    if max_error_rate is not None:
        rate = failed / (ok + failed) if ok + failed else 1.0
        if rate > max_error_rate:
            violations.append(f"error rate {rate:.3g} > {max_error_rate:g}")
    good = [
        s
        for s in samples
        if all(
            s.get(SLO_METRICS[t.metric][2]) is not None and s[SLO_METRICS[t.metric][2]] <= t.limit
            for t in thresholds
        )
    ]
    fraction = len(good) / len(samples) if samples else None
    # GuideLLM's request list and its success count can differ by a request or two at the
    # window's edges; scale its achieved rate rather than recounting records.
    achieved = row.get("achieved_rps")
    duration = float(row.get("duration_s") or 0)
    if fraction is None:
        goodput = None
    elif achieved not in (None, ""):
        goodput = fraction * float(achieved)
    else:
        goodput = len(good) / duration if duration > 0 else None
    return {
        "slo_met": not violations,
        "slo_ratio": max(ratios) if ratios else None,
        "slo_violations": "; ".join(violations),
        "goodput_rps": goodput,
        "goodput_fraction": fraction,
    }


def _why_unmeasured(row: dict[str, Any]) -> str:
    """Why a latency has no value: usually no request finished inside the window, which an
    overloaded server does (the SLO is missed, by how much is unknown, so no ratio)."""
    ok = int(row.get("requests_ok") or 0)
    failed = int(row.get("requests_failed") or 0)
    cut = int(float(row.get("requests_incomplete") or 0))
    if ok == 0 and (failed or cut):
        return (
            f"not measured: no request completed in the window ({failed} failed, {cut} "
            "still running at its end)"
        )
    if ok == 0:
        return "not measured: no request was sent in the window"
    return "not measured: the load generator reported no value"
