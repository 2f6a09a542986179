"""The statistics behind `tunebench compare` and its regression gate.

One interval method per kind of evidence (docs/results-and-compare.md states each one's
assumptions, and benchmarks/compare_calibration.py measures how often each is wrong):

- a percentile of one run's requests (`quantile_change`, quantile_bootstrap.py): a
  smoothed circular block bootstrap over the requests in time order for each side's
  standard error, Welch's t (`welch`, here) with the blocks' degrees of freedom;
- a rate of one run (`rate_change`): batch means over equal time bins of the window, a
  t interval on the log ratio, so a slow stretch of the window widens the interval;
- repeats (`repeats_change`): each repeat's value is one observation of the run-to-run
  spread (a new server start, the machine's state): Welch's t on the logs of the values;
- an error rate (`proportion_change`): the difference of two binomial proportions, the
  Agresti-Caffo interval, in percentage points.

Single-run methods also take `run_cv`: the run-to-run spread (a relative standard deviation
per side) that one window cannot show, added to the interval's variance.

Every result is a `Change`: the estimate, a two-sided interval at the confidence asked for,
and `p_worse(threshold)`, the one-sided p-value of "not worse by more than threshold" that
the gate corrects for multiplicity (Holm) across its rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def scipy_stats():
    """scipy.stats, imported on first use: it costs ~0.5 s, and every CLI command imports
    this module whether or not it computes an interval."""
    from scipy import stats

    return stats


SE_DRAWS = 500  # bootstrap draws for a standard error (its own error: about 3%)


@dataclass(frozen=True)
class Change:
    """B against A: `change` is B/A - 1 (a fraction) or, for proportions, B - A."""

    change: float | None
    low: float | None
    high: float | None
    method: str
    n_a: int
    n_b: int
    note: str = ""  # why there is no interval, or what it does not cover
    # p_worse's t moments: (centre of the log ratio or difference, its SE, degrees of freedom)
    _t: tuple[float, float, float] | None = field(default=None, repr=False, compare=False)
    additive: bool = False  # change is a difference (proportions), not a ratio
    # the part of the SE's square that every point of the same two runs shares (the assumed
    # run-to-run spread): pooling points cannot average it away
    shared_var: float = 0.0

    @property
    def available(self) -> bool:
        return self.low is not None

    def p_worse(self, threshold: float, higher_is_worse: bool) -> float:
        """One-sided p-value of H0 "B is not worse than A by more than `threshold`" (a
        fraction: 0.05 for 5%); small means B is worse by more than that."""
        if not self.available:
            return 1.0
        if self.additive:
            bound = threshold if higher_is_worse else -threshold
        else:
            bound = math.log1p(threshold) if higher_is_worse else math.log1p(-min(threshold, 0.99))
        assert self._t is not None
        center, se, df = self._t
        if se <= 0:
            worse = center > bound if higher_is_worse else center < bound
            return 0.0 if worse else 1.0
        t = (center - bound) / se if higher_is_worse else (bound - center) / se
        return float(scipy_stats().t.sf(t, df))


def not_available(
    method: str, n_a: int, n_b: int, note: str, change: float | None = None
) -> Change:
    return Change(change, None, None, method, n_a, n_b, note)


def rate_bins(
    ends: np.ndarray, amounts: np.ndarray, start: float, end: float, bins: int
) -> np.ndarray:
    """Per-second rate of `amounts` (tokens, or 1 per request) completed in each of `bins`
    equal parts of [start, end]."""
    if bins < 1 or end <= start:
        return np.array([])
    edges = np.linspace(start, end, bins + 1)
    totals, _ = np.histogram(ends, bins=edges, weights=amounts)
    return totals / ((end - start) / bins)


MAX_BINS, PER_BIN = 10, 5  # batch means: up to 10 bins of at least 5 completions each


def bins_for(completions: int) -> int:
    return min(MAX_BINS, completions // PER_BIN)


def rate_change(
    a_bins: np.ndarray,
    b_bins: np.ndarray,
    a_value: float,
    b_value: float,
    confidence: float = 0.95,
    run_cv: float = 0.0,
) -> Change:
    """The change of a rate from batch means over time bins of each window: the point
    values are the load generator's own; the bins give their standard errors."""
    method = "batch means over time bins"
    a_bins, b_bins = np.asarray(a_bins, float), np.asarray(b_bins, float)
    if len(a_bins) < 4 or len(b_bins) < 4:
        return not_available(
            method, len(a_bins), len(b_bins), f"too few completions for {4} time bins of {PER_BIN}"
        )
    if a_value <= 0 or b_value <= 0:
        return not_available(method, len(a_bins), len(b_bins), "a rate is 0: no ratio")
    rel_a = _batch_se(a_bins)
    rel_b = _batch_se(b_bins)
    return welch(
        math.log(b_value / a_value),
        rel_a,
        len(a_bins) - 1,
        rel_b,
        len(b_bins) - 1,
        confidence,
        method,
        len(a_bins),
        len(b_bins),
        run_cv=run_cv,
    )


def _batch_se(bins: np.ndarray) -> float:
    """Relative standard error of the mean of batch means, widened when neighbouring bins
    are positively correlated (a queue's slow stretch spans two bins): by the AR(1)
    variance factor (1 + r1) / (1 - r1) of their lag-1 correlation."""
    mean = max(float(bins.mean()), 1e-12)
    se = float(bins.std(ddof=1)) / math.sqrt(len(bins)) / mean
    centred = bins - bins.mean()
    denominator = float(np.dot(centred, centred))
    if denominator > 0:
        r1 = min(0.9, float(np.dot(centred[:-1], centred[1:])) / denominator)
        if r1 > 0:
            se *= math.sqrt((1 + r1) / (1 - r1))
    return se


def welch(
    center: float,
    se_a: float,
    df_a: int,
    se_b: float,
    df_b: int,
    confidence: float,
    method: str,
    n_a: int,
    n_b: int,
    note: str = "",
    run_cv: float = 0.0,
) -> Change:
    """Welch's t interval of a log ratio from each side's standard error and degrees of
    freedom. `run_cv` (a relative standard deviation per side, taken as known) adds the
    run-to-run variance both sides carry; it widens the interval but, being known, adds
    no degrees-of-freedom penalty."""
    sampled = se_a**2 + se_b**2
    se = math.sqrt(sampled + 2 * run_cv**2)
    if sampled == 0:
        df = float(max(df_a + df_b, 1))
    else:
        spread = (se_a**4 / df_a if df_a else 0) + (se_b**4 / df_b if df_b else 0)
        df = se**4 / spread if spread else float(df_a + df_b)
    half = float(scipy_stats().t.ppf(1 - (1 - confidence) / 2, df)) * se
    return Change(
        math.expm1(center),
        math.expm1(center - half),
        math.expm1(center + half),
        method,
        n_a,
        n_b,
        note,
        _t=(center, se, df),
        shared_var=2 * run_cv**2,
    )


def pooled_change(changes: list[Change], confidence: float = 0.95) -> Change:
    """The mean change of several points' within-run changes (ratios: the geometric mean),
    when they come from separate windows of the same two runs.

    The points' sampling errors are independent (separate windows of requests), so their
    variance shrinks by the number of points; the run-to-run spread (`shared_var`) is common
    to every point of a run and is added once, in full. The degrees of freedom follow
    Welch-Satterthwaite over the points' sampled parts. A uniform change across the points
    (a slower image, a smaller cache) is seen with about sqrt(points) times the precision
    of one point."""
    method = "mean over points of within-run changes"
    usable = [c for c in changes if c.available and c._t is not None]
    n_a, n_b = sum(c.n_a for c in usable), sum(c.n_b for c in usable)
    if len(usable) < 2:
        return not_available(method, n_a, n_b, "fewer than 2 points with a verdict")
    k = len(usable)
    centers = [c._t[0] for c in usable if c._t is not None]
    center = sum(centers) / k
    sampled = [max(0.0, c._t[1] ** 2 - c.shared_var) for c in usable if c._t is not None]
    shared = max(c.shared_var for c in usable)
    variance = sum(sampled) / k**2 + shared
    spread = sum(
        (v / k**2) ** 2 / c._t[2] for v, c in zip(sampled, usable) if c._t is not None and v > 0
    )
    df = variance**2 / spread if spread > 0 else 1e9
    se = math.sqrt(variance)
    half = float(scipy_stats().t.ppf(1 - (1 - confidence) / 2, df)) * se
    additive = usable[0].additive
    if additive:
        low, mid, high = center - half, center, center + half
    else:
        low, mid, high = math.expm1(center - half), math.expm1(center), math.expm1(center + half)
    return Change(
        mid,
        low,
        high,
        method,
        n_a,
        n_b,
        f"mean over {k} points",
        _t=(center, se, df),
        additive=additive,
        shared_var=shared,
    )


# -- across repeats ------------------------------------------------------------------------

REPEATS_METHOD = "Welch's t over repeats"


def repeats_change(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> Change:
    """The change of a metric measured in several repeats per side (each a separate run of
    the point): Welch's t on the logs, so the run-to-run spread is in the interval."""
    method = REPEATS_METHOD
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    a, b = a[np.isfinite(a) & (a > 0)], b[np.isfinite(b) & (b > 0)]
    if len(a) < 2 or len(b) < 2:
        return not_available(method, len(a), len(b), "need 2 repeats per side")
    la, lb = np.log(a), np.log(b)
    return welch(
        float(lb.mean() - la.mean()),
        la.std(ddof=1) / math.sqrt(len(la)),
        len(la) - 1,
        lb.std(ddof=1) / math.sqrt(len(lb)),
        len(lb) - 1,
        confidence,
        method,
        len(a),
        len(b),
    )


PAIRED_METHOD = "paired t over rounds (log ratio within each repeat)"
# Rounds a paired compare needs: with 3 its t has 2 degrees of freedom, and on a machine that
# held still the gate caught a 15% slowdown in 59 of 100 seeds where Welch's t over the same
# repeats caught 84; with 4, 91 and 100, while under a 15% drift between rounds the paired gate
# still caught 91 and Welch 4 (benchmarks/compare_calibration.py --paired-rounds).
PAIRED_MIN_ROUNDS = 4


def paired_rounds_change(pairs: list[tuple[float, float]], confidence: float = 0.95) -> Change:
    """The change of a metric measured in the same rounds on both sides (repeat r of A and
    of B measured one after the other, configurations alternating): the log ratio within
    each round, then a one-sample t over the rounds. A drift of the machine that both sides
    of a round share cancels in its ratio; what is left is the configurations' difference
    and the noise between rounds."""
    ratios = np.array([math.log(b / a) for a, b in pairs if a > 0 and b > 0 and np.isfinite(a * b)])
    if len(ratios) < 2:
        return not_available(PAIRED_METHOD, len(ratios), len(ratios), "need 2 paired rounds")
    return welch(
        float(ratios.mean()),
        float(ratios.std(ddof=1)) / math.sqrt(len(ratios)),
        len(ratios) - 1,
        0.0,
        0,
        confidence,
        PAIRED_METHOD,
        len(ratios),
        len(ratios),
    )


# -- proportions ---------------------------------------------------------------------------


def proportion_change(
    failed_a: int,
    total_a: int,
    failed_b: int,
    total_b: int,
    confidence: float = 0.95,
) -> Change:
    """B's error rate minus A's (fraction points): the Agresti-Caffo interval (one failure
    and one success added to each side, then the normal interval of the difference), which
    keeps its coverage for the few failures a healthy run has, where intervals from each
    side's own posterior came out liberal (6.5% false positives at 2% errors, n 200)."""
    method = "Agresti-Caffo interval of two proportions"
    if total_a <= 0 or total_b <= 0:
        return not_available(method, total_a, total_b, "no requests")
    pa = (failed_a + 1) / (total_a + 2)
    pb = (failed_b + 1) / (total_b + 2)
    se = math.sqrt(pa * (1 - pa) / (total_a + 2) + pb * (1 - pb) / (total_b + 2))
    adjusted = pb - pa
    z = float(scipy_stats().norm.ppf(1 - (1 - confidence) / 2))
    return Change(
        failed_b / total_b - failed_a / total_a,
        adjusted - z * se,
        adjusted + z * se,
        method,
        total_a,
        total_b,
        _t=(adjusted, se, 1e9),
        additive=True,
    )


# -- many rows -----------------------------------------------------------------------------


def holm(p_values: list[float], alpha: float) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected with the family-wise error at alpha."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected
