"""The capacity search under noise: confirmation, the estimate inside the bracket, the
interval (no probability attached), probe windows, the shared rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunebench.points.capacity import CapacitySearch, probe_seconds
from tunebench.points.sustained import RatePoint, sustained_capacity


def queueing_ratio(rate: float, saturation: float) -> float:
    """SLO ratio of an M/M/1-like server: 0.3 at no load, 1 at 0.7 x saturation."""
    return 0.3 / max(1e-6, 1 - rate / saturation)


def noisy_run(search: CapacitySearch, saturation: float, sd: float, rng) -> CapacitySearch:
    while (rate := search.next_rate()) is not None:
        ratio = queueing_ratio(rate, saturation) * math.exp(rng.normal(0.0, sd))
        search.tell(rate, ratio <= 1, ratio=ratio)
    return search


def test_a_miss_that_a_pass_above_contradicts_is_probed_again():
    search = CapacitySearch(start_rate=2.0, noise=0.15)
    search.tell(2.0, False, ratio=1.04)  # an unlucky window
    search.tell(1.0, True, ratio=0.5)
    search.tell(3.0, True, ratio=0.9)  # but a higher rate met the SLO
    assert search.next_rate() == 2.0
    search.tell(2.0, True, ratio=0.7)  # taken together: mean log ratio < 0, met
    assert search.upper is None and search.lower.rate == 3.0


def test_without_a_noise_model_the_failure_wins_at_once():
    search = CapacitySearch(start_rate=2.0)
    search.tell(2.0, False, ratio=1.04)
    search.tell(3.0, True, ratio=0.9)
    assert search.upper.rate == 2.0 and search.next_rate() != 2.0


def test_the_ends_of_a_narrow_bracket_are_confirmed_before_it_converges():
    search = CapacitySearch(start_rate=4.0, noise=0.15, tolerance=0.05)
    search.tell(4.0, True, ratio=0.97)
    search.tell(4.2, False, ratio=1.02)
    assert not search.converged  # both ends within the noise of the limit
    assert search.next_rate() == 4.2  # the upper end first
    search.tell(4.2, False, ratio=1.05)
    assert search.next_rate() in (4.2, 4.0)


def test_the_estimate_lies_inside_the_bracket_where_the_ratio_crosses_one():
    search = CapacitySearch(start_rate=1.0)
    while (rate := search.next_rate()) is not None:
        ratio = queueing_ratio(rate, 10.0)
        search.tell(rate, ratio <= 1, ratio=ratio)
    low, high = search.interval
    assert low <= search.capacity <= high
    assert search.proven == low
    assert abs(search.capacity - 7.0) <= abs(low - 7.0) + 1e-9  # no further than the proven rate


def test_the_capacity_is_reported_with_its_interval_and_no_probability():
    """The noise model's probability that the bracket holds the capacity was not calibrated
    per band (docs/sweep-files.md): neither the summary nor the console states one."""
    from tunebench.report.text import describe_capacity

    search = noisy_run(
        CapacitySearch(start_rate=1.0, noise=0.1), 10.0, 0.1, np.random.default_rng(3)
    )
    assert not hasattr(search, "confidence")
    summary = {
        "rate": search.capacity,
        "probes": len(search.probes),
        "probe_rates": [p.rate for p in search.probes],
        "upper": search.bound.rate if search.bound else None,
        "interval": list(search.interval),
        "converged": search.converged,
    }
    text = describe_capacity(summary)
    assert f"missed at {summary['upper']:.3g})" in text and "confidence" not in text


@pytest.mark.parametrize("sd", [0.05, 0.10])
def test_under_noise_the_estimate_is_within_10_percent_nine_times_in_ten(sd):
    rng = np.random.default_rng(7)
    right, probes = [], []
    for _ in range(400):
        saturation = float(rng.uniform(2.0, 20.0))
        search = noisy_run(CapacitySearch(start_rate=1.0, noise=sd), saturation, sd, rng)
        right.append(abs(search.capacity / (0.7 * saturation) - 1) <= 0.10)
        probes.append(len(search.probes))
    assert np.mean(right) >= 0.90, np.mean(right)
    assert np.median(probes) <= 12


def test_probe_windows_hold_the_requests_the_slo_percentile_needs():
    assert probe_seconds(2.0, 10.0, 0.90) == 72  # 4 x 36 requests at 2 req/s
    assert probe_seconds(2.0, 10.0, 0.95, margin=1.25) == 45  # 1.25 x 72 requests
    assert probe_seconds(2.0, 90.0, 0.90) == 90  # the spec's window is long enough
    assert probe_seconds(20.0, 10.0, 0.90, margin=1.25) == 10
    assert probe_seconds(0.05, 10.0, 0.95) == 100  # at most 10 x the spec's window
    assert probe_seconds(2.0, 10.0, None) == 10


def test_the_shared_rule_walks_up_the_rates_and_stops_at_the_first_miss():
    exact = sustained_capacity(
        [
            RatePoint(1.0, True, 0.5),
            RatePoint(2.0, True, 0.8),
            RatePoint(3.0, False, 1.6),
            RatePoint(4.0, True, 0.9),  # a pass above a miss is luck, not capacity
        ]
    )
    # 1/ratio from 1.25 at 2 req/s to 0.625 at 3 req/s reaches 1 at 2.4
    assert exact.kind == "exact" and exact.rate == pytest.approx(2.4)
    assert sustained_capacity([RatePoint(1.0, False, 1.2)]).kind == "below"
    capped = sustained_capacity([RatePoint(1.0, True, 0.5), RatePoint(2.0, True, 0.6)])
    assert (capped.kind, capped.rate) == ("at-least", 2.0)
    client = sustained_capacity(
        [RatePoint(1.0, True, 0.5), RatePoint(2.0, True, 0.6, client_limited=True)]
    )
    assert (client.kind, client.rate) == ("at-least", 1.0)
    # a server is not faster under more load: the ratio is a running maximum
    bumpy = sustained_capacity(
        [RatePoint(1.0, True, 0.9), RatePoint(2.0, True, 0.4), RatePoint(3.0, False, 1.8)]
    )
    assert bumpy.rate == pytest.approx(2.0 + (1 / 0.9 - 1) / (1 / 0.9 - 1 / 1.8))


def test_a_miss_within_the_noise_is_confirmed_before_the_search_narrows_under_it():
    search = CapacitySearch(start_rate=1.0, noise=0.2)
    search.tell(1.0, True, ratio=0.5)
    search.tell(2.0, False, ratio=1.1)  # log 0.095 < 1.645 x 0.2: could be an unlucky window
    assert search.next_rate() == 2.0
    search.tell(2.0, False, ratio=1.6)  # taken together, clear of the noise
    assert search.next_rate() not in (1.0, 2.0)
    clear = CapacitySearch(start_rate=1.0, noise=0.2)
    clear.tell(1.0, True, ratio=0.5)
    clear.tell(2.0, False, ratio=3.0)  # far over the limit: no confirmation
    assert clear.next_rate() not in (1.0, 2.0)


def test_windows_are_longer_once_the_knee_is_bracketed():
    search = CapacitySearch(start_rate=1.0, noise=0.2)
    assert search.window_margin(4.0, 2.5) == 2.5  # bracketing: large steps, clear verdicts
    search.tell(1.0, True, ratio=0.5)
    assert search.window_margin(4.0, 2.5) == 2.5
    search.tell(2.0, False, ratio=1.5)
    assert search.window_margin(4.0, 2.5) == 4.0  # narrowing near the knee
    assert search.window_margin(1.25, 2.5) == 1.25  # never more than asked
