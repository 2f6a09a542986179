"""The crossing's interval, calibrated (analysis/crossing_interval.py, crossovers.py).

Truth from an analytic law the method does not share: each configuration's median latency
is a straight line in the load, so the true crossing of the interpolated curves is where
the lines meet. The requests come from a generator the method was not built on: gamma
factors (not lognormal) around the law's median, made autocorrelated in time order through
an AR(1) Gaussian copula, as a queue makes them. Over many seeds: the interval covers the
true crossing about as often as it says, a clear crossing is confirmed, and curves that do
not cross (the same law on both sides, or one 4% above the other everywhere) are almost
never said to.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from tunebench.analysis.crossovers import crossovers_between
from tunebench.analysis.sides import LOAD_KEY, Side

TARGETS = (1, 2, 4, 8)
REQUESTS = 300
SEEDS = 150
CONFIDENCE = 0.9
GAMMA_SHAPE = 6.0
AR = 0.6  # lag-1 correlation of the copula: an autocorrelation time of about 4


def law(intercept: float, slope: float):
    return lambda x: intercept + slope * x


def requests_at(median: float, rng: np.random.Generator) -> np.ndarray:
    """REQUESTS latencies in time order whose true median is `median`."""
    z = np.empty(REQUESTS)
    z[0] = rng.standard_normal()
    for t in range(1, REQUESTS):
        z[t] = AR * z[t - 1] + np.sqrt(1 - AR**2) * rng.standard_normal()
    factors = scipy_stats.gamma.ppf(scipy_stats.norm.cdf(z), GAMMA_SHAPE)
    return median * factors / scipy_stats.gamma.median(GAMMA_SHAPE)


def side(name: str, median_at, rng: np.random.Generator) -> Side:
    points, requests = [], []
    for target in TARGETS:
        point_id = f"concurrent-{target}"
        values = requests_at(median_at(target), rng)
        points.append(
            {
                "config_id": "c1",
                "point_id": point_id,
                "load_kind": "concurrent",
                "target": target,
                "repeat": 1,
                "itl_p50_ms": float(np.median(values)),
            }
        )
        requests += [
            {"config_id": "c1", "point_id": point_id, "repeat": 1, "itl_ms": v, "start_time": i}
            for i, v in enumerate(values)
        ]
    return Side(name, pd.DataFrame(points), pd.DataFrame(requests))


def crossings(law_a, law_b, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    sides = [side("A", law_a, rng), side("B", law_b, rng)]
    return crossovers_between(sides, LOAD_KEY, ("itl_p50_ms",), CONFIDENCE, seed=seed)


def test_a_crossing_is_covered_as_often_as_the_interval_says_and_confirmed():
    # A grows fast from a low start, B slowly from a high one: they meet at x = 5
    a, b, truth = law(10, 10), law(50, 2), 5.0
    covered = confirmed = 0
    widths = []
    for seed in range(SEEDS):
        found = crossings(a, b, seed)
        if not found:  # a crossing not seen is one not covered
            continue
        x = min(found, key=lambda x: abs(x["target"] - truth))
        low = x["target_low"] if x["target_low"] is not None else -np.inf
        high = x["target_high"] if x["target_high"] is not None else np.inf
        covered += low <= truth <= high
        confirmed += x["confirmed"]
        if x["confirmed"]:
            widths.append(high - low)
    # 90% nominal: within what 150 seeds can tell (binomial sd 2.4 points), erring wide
    assert 0.84 <= covered / SEEDS <= 0.98, covered / SEEDS
    assert confirmed / SEEDS >= 0.8, confirmed / SEEDS
    # informative: narrower than the bracket of 4 to 8 it lies in
    assert np.median(widths) < 2.5, np.median(widths)


@pytest.mark.parametrize(
    "law_b", [law(10, 10), lambda x: 1.04 * (10 + 10 * x)], ids=["same-law", "4pct-above"]
)
def test_curves_that_do_not_cross_are_almost_never_said_to(law_b):
    said = 0
    for seed in range(SEEDS):
        said += any(x["confirmed"] for x in crossings(law(10, 10), law_b, seed))
    # confirming needs the order significant (5% one-sided) both ways, at a target below and
    # one above: at most the interval's own 10% error (measured: 4.7% for the same law, 2.0%
    # for 4% apart; without the order's check 32% of the same-law pairs had both ends inside)
    assert said / SEEDS <= 1 - CONFIDENCE, said / SEEDS


def test_too_few_requests_get_no_interval_and_say_why():
    rng = np.random.default_rng(1)
    a, b = side("A", law(10, 10), rng), side("B", law(50, 2), rng)
    b.requests = b.requests[b.requests["point_id"] != "concurrent-8"].copy()
    b.requests = pd.concat(
        [b.requests, side("x", law(50, 2), rng).requests.query("point_id == 'concurrent-8'")[:3]]
    )
    found = crossovers_between([a, b], LOAD_KEY, ("itl_p50_ms",), CONFIDENCE)
    assert (
        found
        and "too few requests for an interval: B has 3 at target 8" in found[0]["interval_note"]
    )
