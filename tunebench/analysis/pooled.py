"""A metric's change over every aligned point of a comparison at once (compare's rows with
point "all points"): the geometric mean of the points' ratios, with an interval from the
method the points were compared by.

A change that is moderate at every point is clearer here than at any single point: with
independent points the pooled interval is about sqrt(points) times narrower. With repeats,
the run-to-run spread the points share stays in it (each repeat's, or each round's, mean
over the points is one observation).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tunebench.analysis import stats
from tunebench.analysis.compare_metrics import CompareMetric
from tunebench.analysis.point_evidence import Evidence, paired_rounds, point_value


@dataclass
class Compared:
    """One aligned point's evidence for one metric, kept for the row over all points."""

    a: Evidence
    b: Evidence
    change: stats.Change
    limited: str


def repeat_of(row: pd.Series) -> int:
    """A row's repeat number (1 when the run has none)."""
    value = row.get("repeat")
    try:
        return int(float(value)) if value not in (None, "") and not pd.isna(value) else 1
    except (TypeError, ValueError):
        return 1


def pooled_change(
    metric: CompareMetric, compared: list[Compared], confidence: float
) -> tuple[stats.Change, float | None, float | None, str, tuple[int, int]] | None:
    """The metric's change over all aligned points that have a verdict (the geometric mean of
    the points' ratios; for the error rate, the mean difference), or None when fewer than two
    points have one. A regression that is moderate at every point is clearer here than at
    any single point."""
    usable = [c for c in compared if c.change.available]
    if len(usable) < 2:
        return None
    limited = ",".join(s for s in ("A", "B") if any(s in c.limited.split(",") for c in usable))
    repeats = (min(len(c.a.rows) for c in usable), min(len(c.b.rows) for c in usable))
    values_a = [point_value(metric, c.a) for c in usable]
    values_b = [point_value(metric, c.b) for c in usable]
    value_a, value_b = _mean_value(metric, values_a), _mean_value(metric, values_b)
    repeated = (stats.REPEATS_METHOD, stats.PAIRED_METHOD)
    if metric.kind == "proportion" or all(c.change.method not in repeated for c in usable):
        change = stats.pooled_change([c.change for c in usable], confidence)
    elif all(c.change.method == stats.PAIRED_METHOD for c in usable):
        change = _pooled_rounds(metric, usable, confidence)
    elif all(c.change.method == stats.REPEATS_METHOD for c in usable):
        change = _pooled_repeats(metric, usable, confidence)
    else:
        change = stats.not_available(
            "", repeats[0], repeats[1], "some points were measured with repeats, some without"
        )
    return change, value_a, value_b, limited, repeats


def _mean_value(metric: CompareMetric, values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    if len(known) != len(values) or not known:
        return None
    if metric.kind == "proportion":
        return float(np.mean(known))
    if min(known) <= 0:
        return None
    return float(np.exp(np.log(known).mean()))


def _pooled_repeats(
    metric: CompareMetric, usable: list[Compared], confidence: float
) -> stats.Change:
    """Repeats on both sides: each repeat's geometric mean over the points, then Welch's t
    over the repeats, so the run-to-run spread the points share stays in the interval."""

    def per_repeat(evidence: list[Evidence]) -> np.ndarray:
        by_repeat: list[dict[int, float]] = []
        for side in evidence:
            values: dict[int, float] = {}
            for _, row in side.rows.iterrows():
                value = pd.to_numeric(pd.Series([row.get(metric.column)]), errors="coerce").iloc[0]
                if np.isfinite(value) and value > 0:
                    values[repeat_of(row)] = float(value)
            by_repeat.append(values)
        common = set.intersection(*(set(v) for v in by_repeat))
        return np.array(
            [np.exp(np.mean([np.log(v[r]) for v in by_repeat])) for r in sorted(common)]
        )

    found = stats.repeats_change(
        per_repeat([c.a for c in usable]), per_repeat([c.b for c in usable]), confidence
    )
    if not found.available:
        return dataclasses.replace(found, note="fewer than 2 repeats common to every point")
    return dataclasses.replace(found, note=f"geometric mean over {len(usable)} points per repeat")


def _pooled_rounds(
    metric: CompareMetric, usable: list[Compared], confidence: float
) -> stats.Change:
    """Paired rounds on every point: each round's geometric mean over the points on each
    side, then the paired t over the rounds (a round's drift is shared by all its points)."""
    per_point = [paired_rounds(metric.column, c.a, c.b) or [] for c in usable]
    rounds = min(len(p) for p in per_point)
    pairs = [
        (
            float(np.exp(np.mean([np.log(p[r][0]) for p in per_point]))),
            float(np.exp(np.mean([np.log(p[r][1]) for p in per_point]))),
        )
        for r in range(rounds)
    ]
    found = stats.paired_rounds_change(pairs, confidence)
    return dataclasses.replace(found, note=f"geometric mean over {len(usable)} points per round")
