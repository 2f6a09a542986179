"""Calibration of the compare statistics on data with a known truth (tunebench.testing
.latencies): A/A pairs are independent draws of one distribution (never a run compared
with itself), A/B pairs have a known slowdown. Each bound below can fail."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunebench.analysis import quantile_bootstrap, stats
from tunebench.testing.latencies import request_stream

SEEDS = 300


def false_positive_rate(
    n: int, kind: str, q: float, seeds: int = SEEDS, field: str = "ttft_ms"
) -> tuple[float, int]:
    hits = missing = 0
    for seed in range(seeds):
        a = request_stream(n, kind, seed=2 * seed)
        b = request_stream(n, kind, seed=2 * seed + 1)
        change = quantile_bootstrap.quantile_change(
            getattr(a, field), getattr(b, field), q, rng=np.random.default_rng(seed), draws=1000
        )
        missing += not change.available
        hits += change.available and (change.low > 0 or change.high < 0)
    return hits / seeds, missing


@pytest.mark.parametrize("kind", ["iid", "queue"])
@pytest.mark.parametrize("n", [15, 50, 200])
def test_a_median_of_two_draws_of_one_distribution_is_rarely_significant(n, kind):
    rate, missing = false_positive_rate(n, kind, 0.5)
    assert missing < SEEDS  # a median has a verdict from 15 requests on
    assert rate <= 0.08, rate  # nominal 5%; the bound allows for 300 seeds' noise


@pytest.mark.parametrize("kind", ["iid", "queue"])
def test_the_itl_median_at_200_requests_is_calibrated(kind):
    """The per-request ITL (lognormal; AR(1) with rho 0.7 in `queue`) read 6.2-6.8% false
    positives at 400 seeds with a plain block bootstrap, before smoothing and the block-bias
    correction."""
    rate, _ = false_positive_rate(200, kind, 0.5, seeds=400, field="itl_ms")
    assert rate <= 0.065, rate  # nominal 5%; about 1.4 binomial sd of 400 seeds above


def test_the_block_bias_moment_matches_an_ar1_series():
    """For AR(1) with rho 0.7: tau = (1 + rho) / (1 - rho) = 5.67 and
    m1 = 2 sum(k rho^k) = 2 rho / (1 - rho)^2 = 15.6."""
    rng = np.random.default_rng(5)
    x = np.zeros(40_000)
    for k in range(1, len(x)):
        x[k] = 0.7 * x[k - 1] + rng.normal()
    tau, moment = quantile_bootstrap.autocorrelation_moments(x)
    assert tau == pytest.approx(5.67, rel=0.15) and moment == pytest.approx(15.6, rel=0.25)
    # blocks of four tau understate the variance by about 12%; iid data needs no correction
    assert quantile_bootstrap.block_bias_factor(tau, moment, 23) == pytest.approx(
        1 / (1 - 15.6 / 130), rel=0.1
    )
    assert (
        quantile_bootstrap.block_bias_factor(
            *quantile_bootstrap.autocorrelation_moments(rng.normal(size=500)), 8
        )
        < 1.1
    )


@pytest.mark.parametrize("kind", ["iid", "queue"])
def test_p95_at_200_requests_is_calibrated(kind):
    rate, _ = false_positive_rate(200, kind, 0.95)
    assert rate <= 0.08, rate


def test_the_run_to_run_spread_one_window_cannot_see_is_in_the_interval():
    """Runs whose every latency carries a run factor (sd 4% of the log): an interval of the
    requests alone flags many A/A pairs; with run_cv of that size it is calibrated."""
    alone = with_spread = 0
    for seed in range(SEEDS):
        a = request_stream(200, "iid", seed=2 * seed, run_sd=0.04)
        b = request_stream(200, "iid", seed=2 * seed + 1, run_sd=0.04)
        for run_cv in (0.0, 0.04):
            change = quantile_bootstrap.quantile_change(
                a.ttft_ms, b.ttft_ms, 0.5, rng=np.random.default_rng(seed), run_cv=run_cv
            )
            flagged = change.low > 0 or change.high < 0
            alone += flagged and run_cv == 0
            with_spread += flagged and run_cv > 0
    assert with_spread / SEEDS <= 0.08, with_spread
    assert alone / SEEDS >= 0.10, alone  # why compare adds the spread to single-run intervals


def test_tail_percentiles_from_few_samples_have_no_verdict():
    assert (
        quantile_bootstrap.min_samples(0.5),
        quantile_bootstrap.min_samples(0.9),
        quantile_bootstrap.min_samples(0.95),
        quantile_bootstrap.min_samples(0.99),
    ) == (6, 36, 72, 368)
    a, b = request_stream(50, seed=1), request_stream(50, seed=2)
    change = quantile_bootstrap.quantile_change(a.ttft_ms, b.ttft_ms, 0.95)
    assert not change.available and "need 72 per side for p95" in change.note
    assert change.p_worse(0.05, True) == 1.0  # no verdict never fails a gate


def test_autocorrelated_requests_count_as_fewer_samples():
    queue = request_stream(200, "queue", seed=3)
    independent = request_stream(200, "iid", seed=3)
    assert quantile_bootstrap.autocorrelation_time(np.log(queue.ttft_ms)) > 3
    assert quantile_bootstrap.autocorrelation_time(np.log(independent.ttft_ms)) < 1.5


def test_a_30_percent_slowdown_at_200_requests_is_seen():
    seen = 0
    for seed in range(100):
        a = request_stream(200, "iid", seed=2 * seed)
        b = request_stream(200, "iid", slowdown=0.3, seed=2 * seed + 1)
        change = quantile_bootstrap.quantile_change(a.ttft_ms, b.ttft_ms, 0.5, draws=1000)
        assert change.low > 0  # always significantly worse
        seen += change.p_worse(0.05, True) < 0.05  # worse by more than 5%, one row alone
    assert seen >= 90


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_repeats_a_over_a_false_positive_rate(repeats):
    rng = np.random.default_rng(repeats)
    hits = 0
    for _ in range(SEEDS):
        # each repeat's value: the truth times a run-to-run factor (lognormal, cv 8%)
        a = 100 * rng.lognormal(0, 0.08, repeats)
        b = 100 * rng.lognormal(0, 0.08, repeats)
        change = stats.repeats_change(a, b)
        hits += change.low > 0 or change.high < 0
    assert hits / SEEDS <= 0.08


def test_repeats_see_a_run_to_run_shift_that_one_run_per_side_cannot():
    rng = np.random.default_rng(7)
    a = 100 * rng.lognormal(0, 0.02, 5)
    b = 130 * rng.lognormal(0, 0.02, 5)
    change = stats.repeats_change(a, b)
    assert change.method == "Welch's t over repeats" and change.low > 0.2
    assert not stats.repeats_change(a[:1], b).available  # one repeat: no spread to estimate


def test_rate_intervals_from_time_bins_are_calibrated():
    hits = 0
    for seed in range(SEEDS):
        a, b = (
            request_stream(200, "queue", seed=2 * seed),
            request_stream(200, "queue", seed=2 * seed + 1),
        )
        bins_a = stats.rate_bins(a.end_s, a.output_tokens, 0, a.window_s, stats.bins_for(a.n))
        bins_b = stats.rate_bins(b.end_s, b.output_tokens, 0, b.window_s, stats.bins_for(b.n))
        change = stats.rate_change(bins_a, bins_b, a.tokens_per_s(), b.tokens_per_s())
        hits += change.low > 0 or change.high < 0
    assert hits / SEEDS <= 0.08


def test_error_rates():
    same = [
        stats.proportion_change(
            *np.random.default_rng(s).binomial(100, 0.02, 2).tolist()[:1],
            100,
            int(np.random.default_rng(s + 999).binomial(100, 0.02)),
            100,
        )
        for s in range(SEEDS)
    ]
    assert sum(c.low > 0 or c.high < 0 for c in same) / SEEDS <= 0.08
    half = stats.proportion_change(0, 50, 25, 50)
    assert half.change == pytest.approx(0.5) and half.p_worse(0.05, True) < 0.001


def test_holm_controls_the_family():
    assert stats.holm([0.001, 0.03, 0.04], 0.05) == [True, False, False]
    assert stats.holm([0.01, 0.012, 0.015], 0.05) == [True, True, True]
    assert stats.holm([], 0.05) == []


def _pooled_itl(seed: int, kind: str, slowdown: float, run_cv: float = 0.0) -> stats.Change:
    """The ITL median over three points (three independent windows per side)."""
    changes = []
    for point in range(3):
        a = request_stream(200, kind, seed=10_000 * seed + 10 * point)
        b = request_stream(200, kind, slowdown=slowdown, seed=10_000 * seed + 10 * point + 1)
        changes.append(
            quantile_bootstrap.quantile_change(
                a.itl_ms, b.itl_ms, 0.5, rng=np.random.default_rng(seed), run_cv=run_cv
            )
        )
    return stats.pooled_change(changes)


@pytest.mark.parametrize("kind", ["iid", "queue"])
def test_the_mean_over_points_is_calibrated(kind):
    """The row over all points: A/A false positives over 300 seeds of three-point runs."""
    hits = sum((c := _pooled_itl(seed, kind, 0.0)).low > 0 or c.high < 0 for seed in range(SEEDS))
    assert hits / SEEDS <= 0.08, hits  # nominal 5%


def test_the_mean_over_points_sees_what_one_point_cannot():
    """A 10% slowdown of every point's ITL at 200 requests per point: the row over three
    points is worse by more than 5% (one-sided, 5%) clearly more often than a single point."""
    pooled = single = 0
    for seed in range(100):
        change = _pooled_itl(seed, "queue", 0.10)
        pooled += change.p_worse(0.0, True) < 0.05
        a = request_stream(200, "queue", seed=10_000 * seed)
        b = request_stream(200, "queue", slowdown=0.10, seed=10_000 * seed + 1)
        one = quantile_bootstrap.quantile_change(
            a.itl_ms, b.itl_ms, 0.5, rng=np.random.default_rng(seed)
        )
        single += one.p_worse(0.0, True) < 0.05
    assert pooled >= single + 15, (pooled, single)


def test_the_mean_over_points_keeps_the_shared_run_spread_whole():
    """An assumed run-to-run spread is common to the points: pooling does not shrink it."""
    change = _pooled_itl(1, "iid", 0.0, run_cv=0.06)
    center, se, _ = change._t
    assert se >= math.sqrt(2) * 0.06 and change.shared_var == pytest.approx(2 * 0.06**2)
