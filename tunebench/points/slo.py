"""Latency SLOs: does a point meet them, and how many requests/s met every threshold (goodput).

A sweep's `slo` section sets thresholds at chosen percentiles, e.g.
    slo: {ttft_ms: {p95: 500}, itl_ms: {p50: 50}, max_error_rate: 0.01}
A point meets the SLO when each named percentile of the point is within its threshold and
its error rate is at most `max_error_rate`. Goodput counts the requests that met every
threshold individually (ttft <= 500 ms and itl <= 50 ms): that fraction of the point's
achieved request rate. `slo_ratio` is the largest measured/limit over the thresholds (above
1: missed), the margin a capacity search interpolates on.

Multi-turn sessions (`load.data kind: sessions`) add two limits judged over the point:
`session_e2e_s` (a complete conversation's wall time, first turn sent to last answer) and
`turn_ttft_ms` (each turn's TTFT percentile on its own; the worst turn counts). A point
without sessions fails them ("not checked: no sessions in this point") and gets no goodput:
could not tell is never a pass. Goodput counts requests, so `session_e2e_s` does not enter
it; `turn_ttft_ms` does, as a limit on each request's TTFT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tunebench.points import sessions
from tunebench.points.cells import RowView, SampleView, SloCells

# SLO metric -> (points.csv column prefix, unit suffix, per-request sample column)
SLO_METRICS = {
    "ttft_ms": ("ttft", "ms", "ttft_ms"),
    "itl_ms": ("itl", "ms", "itl_ms"),
    "tpot_ms": ("tpot", "ms", "tpot_ms"),
    "e2e_s": ("e2e", "s", "e2e_s"),
}
# Limits on a point's sessions (points/sessions.py) -> the per-request sample a request's
# goodput checks against the limit (None: the limit is on whole sessions, not requests)
SESSION_SLO_METRICS = {"session_e2e_s": None, "turn_ttft_ms": "ttft_ms"}


@dataclass(frozen=True)
class Threshold:
    metric: str  # ttft_ms | itl_ms | tpot_ms | e2e_s | session_e2e_s | turn_ttft_ms
    percentile: int  # 50, 90, 95, 99
    limit: float

    @property
    def label(self) -> str:
        return f"{self.metric} p{self.percentile} <= {self.limit:g}"


def thresholds_of(slo: dict[str, Any] | None) -> list[Threshold]:
    out = []
    for metric, levels in (slo or {}).items():
        if metric in SLO_METRICS or metric in SESSION_SLO_METRICS:
            for level, limit in levels.items():
                out.append(Threshold(metric, int(level.lstrip("p")), float(limit)))
    return out


def _point_value(row: RowView, samples: Sequence[SampleView], threshold: Threshold) -> float | None:
    prefix, unit, sample = SLO_METRICS[threshold.metric]
    column = f"{prefix}_p{threshold.percentile}_{unit}"
    value = row.get(column)
    if value not in (None, "") and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    values = [s[sample] for s in samples if s.get(sample) is not None]
    return float(np.percentile(values, threshold.percentile)) if values else None


def highest_quantile(slo: dict[str, Any] | None) -> float | None:
    """The highest percentile the SLO names, as a quantile (it sets how many requests a
    window needs: points/samples.py); None without latency thresholds. Session limits are
    left out: their percentiles count sessions or one turn's requests, not the window's."""
    levels = [t.percentile / 100 for t in thresholds_of(slo) if t.metric in SLO_METRICS]
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


def evaluate(row: RowView, samples: Sequence[SampleView], slo: dict[str, Any] | None) -> SloCells:
    """SLO columns for one point; all None when the sweep sets no SLO."""
    thresholds = thresholds_of(slo)
    max_error_rate = (slo or {}).get("max_error_rate")
    if not thresholds and max_error_rate is None:
        return {
            "slo_met": None,
            "slo_ratio": None,
            "slo_violations": None,
            "goodput_rps": None,
            "goodput_fraction": None,
        }
    violations = []
    ratios = []  # measured / limit per threshold: the capacity search interpolates on it
    unchecked = False  # a session limit on a point without sessions
    for threshold in thresholds:
        value, why, where = _measured(row, samples, threshold)
        if value is None:
            violations.append(f"{threshold.label}: {why}")
            unchecked = unchecked or why == sessions.NO_SESSIONS
            continue
        ratios.append(value / threshold.limit)
        if value > threshold.limit:
            violations.append(f"{threshold.label}: {value:.4g}{where}")
    ok, failed = int(row.get("requests_ok") or 0), int(row.get("requests_failed") or 0)
    if max_error_rate is not None:
        rate = failed / (ok + failed) if ok + failed else 1.0
        if rate > max_error_rate:
            violations.append(f"error rate {rate:.3g} > {max_error_rate:g}")
    per_request = [(key, t.limit) for t in thresholds if (key := _sample_key(t)) is not None]
    good = [
        s
        for s in samples
        if all(s.get(key) is not None and s[key] <= limit for key, limit in per_request)
    ]
    fraction = len(good) / len(samples) if samples and not unchecked else None
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


def _measured(
    row: RowView, samples: Sequence[SampleView], threshold: Threshold
) -> tuple[float | None, str, str]:
    """(value, why there is none, where it was found) of one threshold at a point."""
    q = threshold.percentile / 100
    if threshold.metric == "session_e2e_s":
        value, why = sessions.session_e2e(row, samples, q)
        return value, why, ""
    if threshold.metric == "turn_ttft_ms":
        value, turn, why = sessions.turn_ttft(row, samples, q)
        return value, why, f" (turn {turn})" if turn is not None else ""
    value = _point_value(row, samples, threshold)
    return value, "" if value is not None else _why_unmeasured(row), ""


def _sample_key(threshold: Threshold) -> str | None:
    """The per-request sample a request's goodput checks against this threshold."""
    if threshold.metric in SESSION_SLO_METRICS:
        return SESSION_SLO_METRICS[threshold.metric]
    return SLO_METRICS[threshold.metric][2]


def _why_unmeasured(row: RowView) -> str:
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
