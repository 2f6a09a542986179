"""One side's evidence of one aligned point (its rows and per-request samples, by repeat),
and the change of one metric between two sides with the method that evidence allows:
paired rounds, repeats, a percentile's block bootstrap or a rate's batch means
(stats.py, quantile_bootstrap.py). `compare.py` aligns the points and builds the rows."""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tunebench.analysis import quantile_bootstrap, stats
from tunebench.analysis.compare_metrics import CompareMetric

# The run-to-run spread (relative standard deviation per side) that a comparison of single
# windows cannot see and adds to its interval. Measured on the CPU server (AMD EPYC, AVX2,
# 2 cores): three repeats of max-num-seqs 2, each its own server start, differed by 5.2%
# (RMS over TTFT/ITL/e2e medians and rates; tests/fixtures/compare-real, printed by
# benchmarks/compare_calibration.py), rounded up. Runs measured with repeats measure their own.
DEFAULT_RUN_CV = 0.06
WITHIN_RUN_NOTE = (
    "one run per side: the interval adds a run-to-run spread of {cv:.0%} per "
    "side it cannot measure; measure with repeats to measure it"
)


@dataclass
class Evidence:
    """One side's rows of an aligned point and their per-request samples, by repeat."""

    rows: pd.DataFrame
    samples: list[pd.DataFrame]  # one frame per row (repeat), in row order
    # names the evidence (side and aligned point): with the comparison's seed it seeds the
    # bootstrap of each of its samples, so a result does not depend on the order (or the
    # thread) in which the bootstraps were drawn
    name: str = ""
    seed: int = 0
    # every metric of a point reads the same columns: each is converted (and each request
    # sample bootstrapped) once
    _values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _samples: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _boots: dict[str, quantile_bootstrap.QuantileBootstrap] = field(
        default_factory=dict, repr=False
    )

    def values(self, column: str) -> np.ndarray:
        if column not in self._values:
            self._values[column] = (
                pd.to_numeric(self.rows[column], errors="coerce").to_numpy(dtype=float)
                if column in self.rows
                else np.array([])
            )
        return self._values[column]

    def sample(self, column: str) -> np.ndarray:
        if column not in self._samples:
            parts = [s[column] for s in self.samples if column in s]
            if not parts:
                self._samples[column] = np.array([])
            else:
                values = pd.to_numeric(pd.concat(parts), errors="coerce").to_numpy(dtype=float)
                self._samples[column] = values[np.isfinite(values)]
        return self._samples[column]

    def rng_for(self, column: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(f"{self.name}|{column}".encode())])

    def bootstrap(self, column: str) -> quantile_bootstrap.QuantileBootstrap:
        """The request sample's bootstrap, drawn on first use and shared by its quantiles."""
        if column not in self._boots:
            self._boots[column] = quantile_bootstrap.QuantileBootstrap(
                quantile_bootstrap.positive_finite(self.sample(column)), self.rng_for(column)
            )
        return self._boots[column]

    def counts(self) -> tuple[int, int]:
        ok = np.nansum(self.values("requests_ok"))
        failed = np.nansum(self.values("requests_failed"))
        return int(ok + failed), int(failed)


def point_value(metric: CompareMetric, side: Evidence) -> float | None:
    if metric.kind == "proportion":
        total, failed = side.counts()
        return 100.0 * failed / total if total else None
    values = side.values(metric.column)
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) > 1:
        return float(np.exp(np.log(values).mean()))  # geometric mean of the repeats
    if metric.kind == "quantile" and metric.quantile is not None:
        sample = side.sample(metric.sample or "")
        if len(sample):
            return float(np.quantile(sample, metric.quantile))
    return float(values[0]) if len(values) else None


def window_rate_bins(metric: CompareMetric, side: Evidence) -> np.ndarray | None:
    """Batch-means bins of a rate over each window of the side (one per repeat), from the
    requests' end times; None when the run recorded no end times."""
    found: list[np.ndarray] = []
    starts, stops = side.values("start_time"), side.values("end_time")
    if len(starts) != len(side.samples) or len(stops) != len(side.samples):
        return None
    for start, end, sample in zip(starts, stops, side.samples):
        if (
            "end_time" not in sample
            or not np.isfinite(start)
            or not np.isfinite(end)
            or end <= start
        ):
            return None
        ends = pd.to_numeric(sample["end_time"], errors="coerce").to_numpy(dtype=float)
        if metric.amount == "tokens":
            amounts = pd.to_numeric(sample["output_tokens"], errors="coerce").to_numpy(float)
        else:
            amounts = np.ones(len(ends))
        keep = np.isfinite(ends) & (ends >= start) & (ends <= end) & np.isfinite(amounts)
        bins = stats.bins_for(int(keep.sum()))
        if bins >= 4:
            found.append(stats.rate_bins(ends[keep], amounts[keep], start, end, bins))
    return np.concatenate(found) if found else np.array([])


def paired_rounds(column: str, a: Evidence, b: Evidence) -> list[tuple[float, float]] | None:
    """(A, B) per repeat when both sides are configurations of one run measured in the same
    rounds (a sweep with `repeats` alternates them: c1 c2, c1 c2): each round's pair was
    measured minutes apart, on the same machine state; None when the sides are not so paired
    (two runs, or repeats that do not match)."""
    if "run_id" not in a.rows or "run_id" not in b.rows or "repeat" not in a.rows:
        return None
    runs = set(a.rows["run_id"].astype(str)) | set(b.rows["run_id"].astype(str))
    if len(runs) != 1 or "repeat" not in b.rows:
        return None
    by_a = dict(zip(a.rows["repeat"].astype(str), a.values(column)))
    by_b = dict(zip(b.rows["repeat"].astype(str), b.values(column)))
    if len(by_a) != len(a.rows) or len(by_b) != len(b.rows) or set(by_a) != set(by_b):
        return None
    return [(float(by_a[r]), float(by_b[r])) for r in sorted(by_a)]


def measure_change(
    metric: CompareMetric,
    a: Evidence,
    b: Evidence,
    confidence: float,
    run_cv: float = DEFAULT_RUN_CV,
) -> stats.Change:
    """The change of `metric` from A to B with the method the evidence allows."""
    if metric.kind == "proportion":
        total_a, failed_a = a.counts()
        total_b, failed_b = b.counts()
        return stats.proportion_change(failed_a, total_a, failed_b, total_b, confidence)
    if len(a.rows) >= 2 and len(b.rows) >= 2:
        rounds = paired_rounds(metric.column, a, b)
        if rounds is not None and len(rounds) >= stats.PAIRED_MIN_ROUNDS:
            return stats.paired_rounds_change(rounds, confidence)
        return stats.repeats_change(a.values(metric.column), b.values(metric.column), confidence)
    if metric.kind == "quantile":
        sample_a, sample_b = a.sample(metric.sample or ""), b.sample(metric.sample or "")
        if not len(sample_a) or not len(sample_b):
            # the reason is the missing samples, not their count
            sides = [s for s, sample in (("A", sample_a), ("B", sample_b)) if not len(sample)]
            return stats.not_available(
                "block bootstrap over requests, Welch t",
                len(sample_a),
                len(sample_b),
                f"no per-request samples on side {' and '.join(sides)} (a summary, an import "
                "or a recorded run): a percentile's interval needs the requests",
            )
        column = metric.sample or ""
        found = quantile_bootstrap.quantile_change_between(
            lambda: a.bootstrap(column),
            lambda: b.bootstrap(column),
            len(quantile_bootstrap.positive_finite(sample_a)),
            len(quantile_bootstrap.positive_finite(sample_b)),
            metric.quantile or 0.5,
            confidence,
            run_cv=run_cv,
        )
    else:
        bins_a, bins_b = window_rate_bins(metric, a), window_rate_bins(metric, b)
        value_a, value_b = point_value(metric, a), point_value(metric, b)
        if bins_a is None or bins_b is None:
            return stats.not_available(
                "batch means over time bins",
                len(a.rows),
                len(b.rows),
                "no per-request end times in this run",
            )
        if value_a is None or value_b is None:
            return stats.not_available("batch means over time bins", 0, 0, "not measured")
        found = stats.rate_change(bins_a, bins_b, value_a, value_b, confidence, run_cv=run_cv)
    if not found.available:
        return found
    note = WITHIN_RUN_NOTE.format(cv=run_cv)
    if len(a.rows) != len(b.rows):
        note = "one side has repeats, the other not (its requests are pooled): " + note
    return dataclasses.replace(found, note=note)
