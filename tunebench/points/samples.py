"""Is a percentile column backed by enough requests to mean what it says?

A p99 "measured" from 40 requests is the sample's maximum, not a 99th percentile. The rule:
a q-percentile needs the fewest independent samples for which a distribution-free two-sided
interval of it exists at all at 95% confidence, i.e. both q^n and (1-q)^n are below 2.5%
(the sample's extreme order statistic can then bound it). That gives p50: 6 (the floor of
10 applies), p90: 36, p95: 72, p99: 368. It is the same order-statistic reasoning as
MLPerf's early-stopping rule for tail latency, without its one-sided margin. compare uses
the same counts (analysis/stats.py) and refuses a verdict below them.
"""

from __future__ import annotations

import math
import re

from tunebench.numbers import to_float
from tunebench.points.cells import RowView, SampleCells
from tunebench.points.columns import CLIENT_COLUMNS

MIN_REQUESTS = 10  # below this no percentile of a window is reported as sufficient
CONFIDENCE = 0.95
_PERCENTILE = re.compile(r"^(ttft|itl|tpot|e2e)_p(\d+)_(ms|s)$")


def min_samples(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest independent samples for which a two-sided distribution-free interval of
    the q-quantile exists at `confidence` (p50: 6, p90: 36, p95: 72, p99: 368 at 95%)."""
    tail = (1 - confidence) / 2
    return math.ceil(math.log(tail) / math.log(max(q, 1 - q)))


def needed(q: float) -> int:
    return max(min_samples(q), MIN_REQUESTS)


def percentile_columns() -> dict[str, float]:
    """points.csv's percentile columns and their quantile (every one is over requests)."""
    out = {}
    for column in CLIENT_COLUMNS:
        if match := _PERCENTILE.match(column):
            out[column] = int(match.group(2)) / 100
    return out


def thin_percentiles(row: RowView) -> str:
    """The percentile columns of a row that rest on too few requests, e.g.
    "p95, p99: 40 requests, need 72, 368" ('' when every percentile is backed)."""
    have = int(to_float(row.get("requests_ok")) or 0)
    columns = percentile_columns()
    levels = sorted({q for column, q in columns.items() if row.get(column) not in (None, "")})
    thin = [q for q in levels if have < needed(q)]
    if not thin:
        return ""
    names = ", ".join(f"p{round(q * 100)}" for q in thin)
    needs = ", ".join(str(needed(q)) for q in thin)
    return f"{names}: {have} requests, need {needs}"


def sample_columns(row: RowView) -> SampleCells:
    return {"thin_percentiles": thin_percentiles(row)}
